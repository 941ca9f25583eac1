"""Stop requests: the signals that ask a run to checkpoint and stop, noted and acted on later.

Slurm sends the job's warning signal (`--signal=USR1@120`; submitit asks for
USR2) some time before the time limit, and SIGTERM when it preempts, requeues,
cancels or times out a job. The handlers only note the request: a handler runs
between two Python bytecodes of the main thread, where saving (or even
printing) is unsafe. The trainer looks at the note at its next step boundary.

- A warning (USR1, USR2): checkpoint, stop, and requeue the job.
- A stop (TERM, INT): checkpoint and stop; Slurm decides what comes next.
  A second Ctrl-C interrupts at once.
"""

from __future__ import annotations

import enum
import signal
from types import FrameType


class StopKind(enum.IntEnum):
    """What a task was asked to do; a stop outranks a warning."""

    WARNING = 1
    STOP = 2


KINDS = {signal.SIGUSR1: StopKind.WARNING, signal.SIGUSR2: StopKind.WARNING,
         signal.SIGTERM: StopKind.STOP, signal.SIGINT: StopKind.STOP}


class StopSignals:
    """The first and strongest stop request this process received (kind and signal name)."""

    def __init__(self) -> None:
        self.kind: StopKind | None = None
        self.signal_name: str | None = None

    def install(self) -> "StopSignals":
        """Handle every signal in KINDS from now on (they would otherwise end the process)."""
        for signum in KINDS:
            signal.signal(signum, self._note)
        return self

    def _note(self, signum: int, frame: FrameType | None) -> None:
        kind = KINDS[signal.Signals(signum)]
        if signum == signal.SIGINT and self.kind is StopKind.STOP:
            raise KeyboardInterrupt  # asked twice: stop now, without a checkpoint
        if self.kind is None or kind > self.kind:
            self.kind, self.signal_name = kind, signal.Signals(signum).name
