"""The login side of a job: how it is checked, written and submitted.

What the job is (its request, node range, pack's share, sweep, job line) is spec/'s, pure. Here: `jobsection` reads
the YAML's `job:` section; `preflight` and `partitions` check the request can run; `plan` is one job of any kind,
`script` writes its script, every kind's (templates/job.sbatch); `submission` submits it (submitit, or its script
through the Slurm client; --local: this process becomes the job line, the ranks started by injob/mock_srun.py);
`snapshot_settings` reads a job's settings as its code snapshot (runs/snapshot.py) holds them. Nothing here imports
TensorFlow.
"""
