"""The Slurm client: the one place that runs Slurm's commands (sbatch, srun, scontrol, squeue, sacct, scancel,
sinfo, sacctmgr), and what reads their answers about a job.

`commands` runs them (each with a timeout; a missing or silent Slurm is a failed run, never a traceback);
`follow` reads a job's state and its chief's progress from them; `pending` says in words why a job waits.
Everything else in hpc-train asks Slurm through this package (tests/test_architecture.py checks it).
"""
