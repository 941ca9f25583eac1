"""A packed sweep's own scheduler of steps inside its one allocation: `core` (pure: shares, queue, next trial,
retries), `runner` (the edge: `hpc-train pack`, each trial an srun step through the Slurm client)."""
