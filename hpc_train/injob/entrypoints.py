"""What submitit pickles for a job `submit` submits: a callable that never runs.

submitit submits a callable, and its script ends with the srun line that would
run it on every rank; the script's setup hands the job to hpc-train's job body
first (`exec PYTHON -m hpc_train job ...`, hpc_train/injob/body.py), whose
ranks run `python -m hpc_train train` or the user's command supervised, as in
every other script hpc-train writes. So this only has to be importable.
"""

from __future__ import annotations


def body_runs_the_ranks() -> None:
    """Never run: the job body replaced the batch shell before submitit's srun line."""
    raise RuntimeError("hpc-train's job body runs the ranks: submitit's own srun line was not meant to run")
