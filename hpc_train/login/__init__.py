"""The login side of a job: what it asks for, and how it is submitted.

`request` is the job request (validated before anything reaches Slurm); `preflight` and `partitions` check it
can run; `script` renders templates/job.sbatch; `submission` submits (submitit, or one sbatch for a sweep's
array) and `mock_srun` runs a step's ranks on this machine (--local, `hpc-train launch`); `sweep` turns
`--sweep` and `sweep:` into checked elements. Nothing here imports TensorFlow.
"""
