"""Requeueing a stopped job: whether it may be (pure), and asking Slurm to (`scontrol requeue`).

The chief asks once every task has saved its part of the checkpoint and is
about to exit, so nothing is lost when Slurm ends this run of the job; the
requeued job starts the same batch script again, in the same job id and run
folder, and the trainer resumes from the checkpoint. The requeues recorded in
the run's history (attempts.py) bound the loop: retries after a failure are
counted apart (max_retries). Without a history, SLURM_RESTART_COUNT (every
restart, for any reason) does.

`requeue_stopped` is the one rule for a run that stopped on the time-limit
warning to go on later, the trainer's and a user's command's (injob/supervisor.py)
alike: rank 0 alone calls it (the chief), once every rank has saved. It sits with
the run folders, below both the trainer and the job body, because both use it and
what it decides is the run's history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpc_train.container.runtime import IN_CONTAINER
from hpc_train.runs import attempts
from hpc_train.slurm.client import SlurmClient


# In the run folder: the job a rank in an image asks the job body to requeue (it has no Slurm commands there).
REQUEUE_ASKED = ".requeue-asked"


@dataclass(frozen=True)
class RequeuePlan:
    job_id: str | None  # None: do not requeue, `reason` says why
    reason: str


@dataclass(frozen=True)
class RequeueOutcome:
    """What came of a stopped run's wish to go on later: requeued, not planned (`reason`), or refused by Slurm."""

    job_id: str | None  # the job Slurm was asked to requeue; None: it was not asked, `reason` says why
    reason: str  # the plan's: "requeue 1 of at most 5", or why there is no requeue
    problem: str | None = None  # scontrol's complaint, when it would not requeue the job

    @property
    def requeued(self) -> bool:
        return self.job_id is not None and self.problem is None

    def asking(self) -> str:
        """'requeueing job 42 (requeue 1 of at most 5)': said before Slurm is asked, as its yes ends the run."""
        return f"requeueing job {self.job_id} ({self.reason})"

    def says(self) -> str:
        """'requeued job 42 (requeue 1 of at most 5)', 'not requeued: WHY', or 'scontrol requeue 42 failed (...)'."""
        if self.requeued:
            return f"requeued job {self.job_id} ({self.reason})"
        if self.problem is None:
            return f"not requeued: {self.reason}"
        return f"scontrol requeue {self.job_id} failed ({self.problem})"


# Set in a packed sweep's trials (injob/pack/runner.py): the job is the pack's, which requeues it itself.
PACKED = "HPC_TRAIN_PACKED"


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
    if environ.get(PACKED):
        return RequeuePlan(None, "a packed trial: the pack requeues its job once every trial has stopped")
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


def requeue_stopped(environ: Mapping[str, str], max_requeues: int, run_dir: Path | None,
                    global_step: int | None = None,
                    before: Callable[[RequeueOutcome], None] = lambda asking: None) -> RequeueOutcome:
    """Requeue the job of a run stopped by the time-limit warning, if it may be; record it in the run's history.

    Earlier requeues count as the run folder's history says (`run_dir`), else as SLURM_RESTART_COUNT does.
    `before(asking)` runs once the requeue is decided, before Slurm is asked: Slurm's yes ends this run of the job
    (SIGTERM, SIGKILL KillWait seconds later) at once, so what a rank says of it is said there (`asking.asking()`),
    and only a refusal after.
    """
    done = attempts.requeues_done(attempts.history(run_dir)) if run_dir is not None else None
    plan = plan_requeue(environ, max_requeues, done)
    if plan.job_id is None:
        return RequeueOutcome(None, plan.reason)
    before(RequeueOutcome(plan.job_id, plan.reason))
    # Recorded before Slurm is asked, taken back if it refuses: its yes brings the job body's SIGTERM at once, and
    # the body reads the history then to tell its job's own requeue from a cancel (injob/onterm.py: the attempt's
    # end, the nodes it gave back kept out of the next allocation). Recorded after, a loaded machine let the body
    # read it first: the requeued job was allocated the node it had given back.
    # (A cancel or a preemption whose SIGTERM comes within scontrol's round trip now reads as this requeue; before,
    # every requeue could read as a cancel. A history that cannot be written does not stop the requeue.)
    entry = attempts.requeue_entry(restart_count(environ) + 1, global_step)
    recorded = _best_effort(attempts.record, run_dir, entry)
    # In an image there is no scontrol: the job body, outside it, requeues the job once this rank has exited.
    problem = ask_the_body(run_dir, plan.job_id) if environ.get(IN_CONTAINER) else requeue(plan.job_id)
    if problem is not None:
        if recorded:
            _best_effort(attempts.withdraw, run_dir, entry)
        return RequeueOutcome(plan.job_id, plan.reason, problem)
    return RequeueOutcome(plan.job_id, plan.reason)


def _best_effort(write: Callable[[Path, dict[str, Any]], None], run_dir: Path | None,
                 entry: dict[str, Any]) -> bool:
    """write(run_dir, entry), True when done; False without a run folder, or one that cannot be written (the
    requeue goes on without its history)."""
    if run_dir is None:
        return False
    try:
        write(run_dir, entry)
    except OSError:
        return False
    return True


def ask_the_body(run_dir: Path | None, job_id: str) -> str | None:
    """A rank in an image: ask the job body, outside it, to requeue the job after the step (None: asked)."""
    if run_dir is None:
        return "no run folder to ask the job body through, and no scontrol in the image"
    try:
        (Path(run_dir) / REQUEUE_ASKED).write_text(job_id)
    except OSError as error:
        return f"could not ask the job body ({error.strerror})"
    return None


def asked_by_a_rank(run_dir: Path) -> str | None:
    """The job a rank in an image asked the body to requeue (the request taken), None when none asked."""
    asked = Path(run_dir) / REQUEUE_ASKED
    try:
        job_id = asked.read_text().strip()
        asked.unlink()
    except OSError:
        return None
    return job_id or None
