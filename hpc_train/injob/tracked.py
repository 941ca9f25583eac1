"""The job's tracked run around one attempt of the job body (body.py): opened before the step, its variables given
to every rank, and ended as the attempt ended (tracking/job.py does the logging):

- the prologue ended the job before its step (its retries are spent): FAILED;
- the prologue moved the job off a failed node (it requeued itself): nothing, the next attempt goes on with the run;
- Slurm's SIGTERM during the step: KILLED at once when Slurm cancelled the job (scancel, the time limit, as MLflow
  says it), before the SIGKILL that follows KillWait later (30 s by default); nothing when the job was requeued
  (`scontrol requeue`: the trainer's own, a preemption), as the job goes on;
- else after the step (and the epilogue): as final_status says.

A cancel and a requeue both end the attempt with the same SIGTERM, and `scontrol show job` says COMPLETING for both
while it comes; what tells them apart is that a requeue has already counted one restart more (Restarts) than this
attempt's SLURM_RESTART_COUNT. A SIGTERM while the job is still RUNNING is no end of the job: a preemption with
a GraceTime signals the job before it requeues it (so before Restarts counts it), `scancel --signal` only signals.
The run stays open then only where the body lives on past that SIGTERM (its handler before ignored or caught it);
where the body ends by it (the default), nothing else would end the run: KILLED (an attempt that follows, a
requeue's, opens it again). Either way the body then does on that SIGTERM what it would without tracking; a second
SIGTERM while the first is seen to does it at once (the default: the body ends then).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hpc_train.runs.requeue import restart_count
from hpc_train.runs.state import read_state
from hpc_train.slurm.client import SlurmClient
from hpc_train.tracking.settings import final_status

# What `scontrol show job` says of a job that Slurm ends for good (scancel, its time limit, a preemption that cancels):
# the state Slurm sets before it signals the steps, with the COMPLETING flag it prints first while they end; the bare
# states once they have. Anything else (RUNNING: a GraceTime preemption or a bare signal; REQUEUED, ...) goes on.
ENDED_FOR_GOOD = frozenset({"COMPLETING", "CANCELLED", "TIMEOUT", "DEADLINE", "PREEMPTED"})
# At most 3 s in all: well within KillWait (30 s by default; 5 on the test cluster, where 5 would race its SIGKILL).
ASK_SECONDS = 1.0  # at most this long for Slurm's word on the job, on its SIGTERM
KILL_SECONDS = 2.0  # at most this long to end the run KILLED (its status first, then what time allows)


@dataclass
class Attempt:
    """The attempt's environment for the ranks (the run's variables added when tracked), and its end to say."""

    env: dict[str, str]
    tracking: Any = None  # tracking/job.py's JobTracking; None: not tracked

    def ended(self, step_code: int, job_code: int) -> None:
        """After the step (and the epilogue): the run's end, or nothing while the job goes on."""
        if self.tracking is not None:
            self.tracking.finish(step_code, job_code)


@contextmanager
def tracked_attempt(body: Any, env: Mapping[str, str], ended: int | None, slurm: bool) -> Iterator[Attempt]:
    """The attempt of `body` (a JobBody) whose prologue said `ended` (None: the step runs), its run opened when the
    job asked for one; `slurm`: the step is srun's, so Slurm's SIGTERM ends a cancelled job's run KILLED."""
    if body.track != "mlflow" or ended == 0:  # not tracked, or moved: the job goes on, its run open
        yield Attempt(dict(env))
        return
    import sys

    from hpc_train.tracking.job import JobTracking  # (which imports MLflow only when a run is opened)

    tracking = JobTracking.for_job(body.run_dir, body.tracking_uri, body.experiment, env,
                                   lambda line: print(line, file=sys.stderr, flush=True))
    if ended is not None:  # the prologue ended the job: its retries are spent
        attempt = Attempt({**env, **tracking.start()}, tracking)
        tracking.finish(ended, ended)
        yield attempt
        return
    previous = signal.getsignal(signal.SIGTERM)
    on_term = _ending_on_term(tracking, env, previous) if slurm else None
    if on_term is not None:  # before start(), which imports MLflow and opens the store: seconds a cancel may hit
        signal.signal(signal.SIGTERM, on_term)
    try:
        yield Attempt({**env, **tracking.start()}, tracking)  # every rank joins the job's run
    finally:
        if on_term is not None and signal.getsignal(signal.SIGTERM) is on_term:  # (the epilogue may ignore it now)
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _ending_on_term(tracking: Any, env: Mapping[str, str], previous: Any) -> Any:
    """A SIGTERM handler: the run ended KILLED when Slurm cancelled the job (or the body ends by this SIGTERM while
    the job still runs), then the SIGTERM does what `previous` (the handler before this one) did. Once the attempt's
    end has begun (finish), the run's end is finish's: only `previous` acts (two ends at once would log and write
    over each other); so too for a SIGTERM that comes while the handler sees to one (Python runs it inside)."""
    then = after_term(previous)
    seeing_to = False  # a SIGTERM is being seen to (a plain flag: no lock inside a signal handler)

    def on_term(signum: int, frame: Any) -> None:
        nonlocal seeing_to
        if seeing_to or tracking.finishing:
            return _as_before(then, previous, signum, frame)
        seeing_to = True
        try:
            shown = SlurmClient.local(env).show_job(env.get("SLURM_JOB_ID", ""), timeout=ASK_SECONDS)
            if status_on_term(shown, restart_count(env), read_state(tracking.run_dir), tracking.since,
                              dies=then == "default" or getattr(previous, "ends_the_body", False)) is not None:
                tracking.kill(KILL_SECONDS)
            _as_before(then, previous, signum, frame)
        finally:
            seeing_to = False

    return on_term


def _as_before(then: str, previous: Any, signum: int, frame: Any) -> None:
    """What the SIGTERM does without tracking (`then`: after_term(previous))."""
    if then == "call":
        previous(signum, frame)
    elif then == "default":  # the job's processes end on Slurm's SIGTERM
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def after_term(previous: Any) -> str:
    """What Slurm's SIGTERM does once the run is seen to (pure): "ignore" where it was ignored (the body lives on,
    as it would without tracking), "call" a Python handler, else "default" (the body ends by it; None: a handler
    not set from Python, read as the default)."""
    if previous is signal.SIG_IGN:
        return "ignore"
    return "call" if callable(previous) else "default"


def status_on_term(shown: Mapping[str, str], restarts: int, state: Mapping[str, Any], since: float,
                   dies: bool = False) -> str | None:
    """The run's end on Slurm's SIGTERM during the step (pure): KILLED when the job was cancelled or reached its time
    limit, or when it still RUNs and the body ends by this SIGTERM (`dies`: nothing else would end the run); None
    when it goes on (still RUNNING and the body lives on: see ENDED_FOR_GOOD; Slurm counted a restart more than this
    attempt's `restarts`: it was requeued; or state.json, written since `since`, says requeued) or when Slurm did
    not answer (the next attempt, or `hpc-train track sync`, ends it then). `shown`: `scontrol show job`'s fields."""
    counted, job_state = shown.get("Restarts", ""), shown.get("JobState")
    if not counted.isdigit() or int(counted) > restarts:
        return None
    if job_state not in ENDED_FOR_GOOD and not (dies and job_state == "RUNNING"):
        return None
    return final_status(143, 143, state, since)  # KILLED, unless the run folder says requeued in this attempt
