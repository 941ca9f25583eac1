"""What runs inside a Slurm job, around and beside its ranks.

`prologue` and `epilogue` are what every batch script runs before its step and after a failed one (a retry, or
the job's exit code); `failures` says why a step failed (pure) and `retry` whether and where to retry it;
`requeue` asks Slurm to requeue a stopped job; `supervisor` runs a user's command as a rank, under the
bootstrap; `entrypoints` is what each rank of a submitit-submitted job runs. Nothing here imports TensorFlow at
import time.
"""
