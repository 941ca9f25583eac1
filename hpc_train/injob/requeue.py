"""Requeueing a stopped job: whether it may be (pure), and asking Slurm to (`scontrol requeue`).

The chief asks once every task has saved its part of the checkpoint and is
about to exit, so nothing is lost when Slurm ends this run of the job; the
requeued job starts the same batch script again, in the same job id and run
folder, and the trainer resumes from the checkpoint. The requeues recorded in
the run's history (attempts.py) bound the loop: retries after a failure are
counted apart (max_retries). Without a history, SLURM_RESTART_COUNT (every
restart, for any reason) does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hpc_train.slurm.client import SlurmClient


@dataclass(frozen=True)
class RequeuePlan:
    job_id: str | None  # None: do not requeue, `reason` says why
    reason: str


def restart_count(environ: Mapping[str, str]) -> int:
    """How often Slurm has restarted this job (SLURM_RESTART_COUNT; 0 when unset or not a number)."""
    text = environ.get("SLURM_RESTART_COUNT", "0")
    return int(text) if text.isdigit() else 0


def plan_requeue(environ: Mapping[str, str], max_requeues: int, requeues_done: int | None = None) -> RequeuePlan:
    """Requeue this job, or why not: not a Slurm batch job, or requeued `max_requeues` times already
    (`requeues_done`: for the time limit, as the run's history says; None: every restart counts)."""
    job_id = environ.get("SLURM_JOB_ID", "")
    if not job_id:
        return RequeuePlan(None, "not a Slurm job: run the same command again to resume")
    restarts = restart_count(environ) if requeues_done is None else requeues_done
    if max_requeues < 1:
        return RequeuePlan(None, f"max_requeues is {max_requeues}: resubmit the job to resume")
    if restarts >= max_requeues:
        return RequeuePlan(None, f"job {job_id} has been requeued {restarts} time(s), max_requeues is "
                                 f"{max_requeues}: resubmit it to resume, or raise max_requeues")
    return RequeuePlan(job_id, f"requeue {restarts + 1} of at most {max_requeues}")


def requeue(job_id: str, timeout: float = 60.0) -> str | None:
    """Ask Slurm to requeue the job; None when it agreed, else its complaint."""
    return SlurmClient.local().requeue(job_id, timeout=timeout)
