"""The shared trainer: one MNIST trainer for single, mirrored, multi-worker and parameter-server runs.

Modules: `cluster` (which task am I; pure, no TensorFlow), `model`, `pipeline`,
`strategy`, `servers` (ps and worker tasks of a parameter-server job),
`callbacks` (progress, metrics, checkpoints) and `trainer` (the run).
Everything but `cluster` imports TensorFlow, through tf-keras (Keras 3 cannot
train under MultiWorkerMirroredStrategy or ParameterServerStrategy).
"""
