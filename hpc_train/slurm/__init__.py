"""The Slurm client: the one place that runs Slurm's commands (sbatch, srun, scontrol, squeue, sacct, scancel,
sinfo, sacctmgr), and what reads their answers about a job.

`client` is `SlurmClient`, those commands as methods (each with a timeout; a missing or silent Slurm is a
failed run, never a traceback), built at the edge (`SlurmClient.local(os.environ)`) and passed in;
`transport` runs a client's argv (`LocalTransport` here; the same argv could go over ssh to a login node);
`follow` reads a job's state and its chief's progress through a client; `pending` says in words why a job
waits. Everything else in hpc-train asks Slurm through a client (tests/test_architecture.py checks it).
"""
