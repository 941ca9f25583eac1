"""The shared trainer: one MNIST trainer for single, mirrored, multi-worker and parameter-server runs.

Modules without TensorFlow: `cluster` (which task am I), `rendezvous` (the
start-up barrier), `progress` (steps, epochs and the data position),
`stopping` (signals), `requeue` and `runstate` (state.json). With TensorFlow,
through tf-keras (Keras 3 cannot train under MultiWorkerMirroredStrategy or
ParameterServerStrategy): `model`, `pipeline`, `strategy`, `servers` (ps and
worker tasks of a parameter-server job), `callbacks` (progress, metrics,
checkpoints, stopping at a step boundary), `checkpoints` and `trainer` (the run).
"""
