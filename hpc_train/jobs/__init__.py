"""A job's life: what it asks Slurm for, how it is submitted and followed, and what its ranks run.

On the login node: `spec` (the request), `preflight` and `partitions` (can it
run?), `render` (an sbatch script), `submit` (submitit) and `launch` (the local
mock-Slurm backend beside it), `follow`, `pending` and `folders`. In the job:
`task` (what each rank of a submitted job runs), `command` (a user's command,
supervised), `requeue`, `runstate` (state.json) and `attempts` (its history
of failures), `failures` and `retry` (why a step failed, and retrying it on
healthy nodes), `prologue` and `epilogue` (what the batch script does before
its step and after a failed one), `sweep` and `compare` (a sweep's elements, and
ranking their runs). `slurm` is the one module that runs Slurm's commands; everything else
asks it. Nothing here imports TensorFlow at import time.
"""
