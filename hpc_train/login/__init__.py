"""The login side of a job: what it asks for, and how it is submitted.

`request` is the job request (validated before anything reaches Slurm); `preflight` and `partitions` check it
can run; `script` renders templates/job.sbatch; `submission` submits (submitit, or one sbatch for a sweep's
array; --local runs the ranks here through injob/mock_srun.py); `snapshot_settings` reads a job's settings as
its code snapshot (runs/snapshot.py) holds them. A sweep's elements are spec/sweep.py's. Nothing here imports
TensorFlow.
"""
