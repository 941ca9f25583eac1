"""The run loop: one trainer for single, mirrored, multi-worker and parameter-server runs, of any task module.

It knows nothing of MNIST (that is hpc_train/tasks/mnist/, a task module like a
user's). Modules without TensorFlow: `usertask` (loading and calling a task
module, and checking what it returns), `rank` (which rank am I), `outcome` (how a run
ends), `lines` (what a rank prints), `paths` (where a rank writes), `rendezvous` (the start-up barrier),
`progress` (steps, epochs and the data position), `stopping` (signals, and
the watcher that ends a stuck step), `precision` (what `precision: auto`
picks; it asks TensorFlow for the GPUs only when called), `memory` and
`threads`, `fit` (`hpc_train.fit`). With TensorFlow, through tf-keras (Keras 3
cannot train under MultiWorkerMirroredStrategy or ParameterServerStrategy):
`inputs` (a task's datasets), `strategy`, `metrics` (summed once per epoch),
`servers` (ps and worker ranks of a parameter-server job), `callbacks`
(progress, checkpoints, stopping at a step boundary), `checkpoints` and
`trainer` (the run).
"""
