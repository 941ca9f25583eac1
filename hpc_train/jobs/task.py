"""What each task of a submitted job runs (through submitit): the trainer, writing into the job's folder.

Kept free of TensorFlow at import time: the login node pickles a reference to
`train_task`, and only the compute node imports the trainer. A task that stops
on a signal (to be requeued) ends its process there and then, so submitit
records no result for a job that is not over.
"""

from __future__ import annotations

from typing import Any


def train_task(settings: dict[str, Any]) -> int:
    """Train with these settings; the output goes to this job's folder (runs/NAME-JOBID)."""
    import submitit

    from hpc_train.config import TrainConfig
    from hpc_train.training.trainer import run

    folder = submitit.JobEnvironment().paths.folder
    code = run(TrainConfig(**{**settings, "output_dir": str(folder)}))
    if code != 0:
        raise RuntimeError(f"training exited with code {code}")  # submitit marks the job failed
    return code
