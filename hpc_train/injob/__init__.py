"""What runs inside a Slurm job, around and beside its ranks.

`body` is the job body every batch script hands the job to (`hpc-train job`): the start line, then `prologue`
(how this attempt came about), the step, and after a failed one `epilogue` (a retry, or the job's exit code);
`failures` says why a step failed (pure) and `retry` whether and where to retry it (the one rule for a run
stopped by the time-limit warning, `requeue`, sits in runs/: the trainer uses it too); `supervisor` runs a user's
command as a rank, under the bootstrap; `mock_srun` runs a step's ranks on this machine without Slurm (--local,
`hpc-train launch`); `entrypoints` is the callable submitit pickles: the job body itself, run once. Nothing
here imports TensorFlow at import time.
"""
