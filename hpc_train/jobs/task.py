"""What each task of a submitted job runs (through submitit): the trainer, writing into the job's folder.

Kept free of TensorFlow at import time: the login node pickles a reference to
`train_task`, and only the compute node imports the trainer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def train_task(settings: dict[str, Any]) -> int:
    """Train with these settings; the output goes to this job's folder (runs/NAME-JOBID)."""
    import submitit

    from hpc_train.config import TrainConfig
    from hpc_train.training.runstate import read_state
    from hpc_train.training.trainer import run

    folder = submitit.JobEnvironment().paths.folder
    code = run(TrainConfig(**{**settings, "output_dir": str(folder)}))
    if code == 0 and read_state(Path(folder)).get("state") == "requeued":
        # Slurm runs the job again and it resumes; a result now would read as the job's end.
        raise SystemExit(0)
    if code != 0:
        raise RuntimeError(f"training exited with code {code}; see {folder}/state.json")  # submitit: failed
    return code
