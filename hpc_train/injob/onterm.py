"""Slurm's SIGTERM while the job body waits on its step: the attempt's end recorded before the signal ends the body,
so that a job Slurm forgets reads as it ended (cancelled), not `unknown`; and a job that requeued itself keeps the
nodes it gave back after a failure out of its next allocation (retry.py), as a retry's requeue does."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from hpc_train.injob.retry import keep_given_back_out_of
from hpc_train.injob.trial import requeues_done
from hpc_train.runs.attempts import record_end
from hpc_train.version import PREFIX


def ending_on_term(attempt_here: tuple[Any, ...], requeues: int, tasks: str | None = None,
                   job_id: str | None = None) -> Callable[[int, Any], None]:
    """A SIGTERM handler for the step's time: the attempt's end recorded (128 + the signal, the signal named; going on
    when the job requeued itself meanwhile), then the SIGTERM ends the body as it would have, so that a job Slurm
    forgets reads as it ended (cancelled), not `unknown`. (The epilogue, after, ignores SIGTERM: it has its own.)
    A job that requeued itself (a rank near its time limit) keeps the nodes it gave back after a failure out of its
    next allocation, as a retry would (retry.py)."""

    def on_term(signum: int, frame: Any) -> None:
        requeued = requeues_done(attempt_here[0]) > requeues
        record_end(*attempt_here, 128 + signum, requeued, signal_number=signum, tasks=tasks)
        if requeued and job_id:
            try:
                keep_given_back_out_of(attempt_here[0], job_id)
            except Exception as error:  # noqa: BLE001 - the signal must still end the body
                print(f"{PREFIX}: warning: the nodes given back after failing were not kept out of the next "
                      f"allocation ({type(error).__name__}: {error})", file=sys.stderr, flush=True)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    on_term.ends_the_body = True  # type: ignore[attr-defined]  # (as the default does: tracked.py ends the run)
    return on_term
