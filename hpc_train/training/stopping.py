"""Stop requests: the signals that ask a run to checkpoint and stop, noted and acted on later.

Slurm sends the job's warning signal (`--signal=USR1@120`, every job hpc-train
submits; USR2 is taken alike) some time before the time limit, and SIGTERM when it preempts, requeues,
cancels or times out a job. The handlers only note the request: a handler runs
between two Python bytecodes of the main thread, where saving (or even
printing) is unsafe. The trainer looks at the note at its next step boundary.

- A warning (USR1, USR2): checkpoint, stop, and requeue the job.
- A stop (TERM, INT): checkpoint and stop; Slurm decides what comes next.
  A second Ctrl-C interrupts at once.

A step that never returns (its data stopped flowing, a collective waits for a
peer that froze) holds the main thread in TensorFlow's C++, where no Python
handler runs, so no step boundary ever comes. While training, a watcher thread
(`watch`) sees every signal through Python's wakeup fd and ends the process at
once, in one line that says so, on a second TERM or INT (2 s or more after
the first: one sooner is the same request delivered twice), or when no step
boundary came within the grace period after the first: at least a minute, and
three times the longest stretch between two step boundaries seen so far, so a
slow but healthy step is never cut short. Once the stop's step boundary is
reached the run is saving its checkpoint: a timer no longer ends it unless
ten minutes have passed since the stop; a second signal still does.
"""

from __future__ import annotations

import enum
import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType


class StopKind(enum.IntEnum):
    """What a task was asked to do; a stop outranks a warning."""

    WARNING = 1
    STOP = 2


KINDS = {signal.SIGUSR1: StopKind.WARNING, signal.SIGUSR2: StopKind.WARNING,
         signal.SIGTERM: StopKind.STOP, signal.SIGINT: StopKind.STOP}


@dataclass(frozen=True)
class Grace:
    """How long a stop may wait for a step boundary, and then for its checkpoint, before the process ends."""

    # Slurm's KILL comes KillWait (30 s by default) after its TERM anyway; off Slurm a minute is a long wait.
    floor_seconds: float = 60.0
    # Times the longest stretch between two step boundaries seen: a boundary that late is not coming.
    stretches: float = 3.0
    # Once the stop's step boundary came: from the stop to the checkpoint saved (and the other ranks' barrier).
    saving_seconds: float = 600.0
    # A stop this soon after the first is the same request delivered twice, not a second ask: under Slurm a task
    # may get scancel's SIGTERM from its step and again through srun, which forwards what it receives.
    same_request_seconds: float = 2.0
    # What the run records of an end at once (state.json) gets this long: its file system may be the one that hangs.
    record_seconds: float = 2.0

    def for_boundary(self, longest_stretch: float) -> float:
        return max(self.floor_seconds, self.stretches * longest_stretch)


def stuck_line(signal_name: str, second: bool, boundary_reached: bool, waited: float) -> str:
    """The one line a process ended at once says (pure)."""
    if boundary_reached:
        cause = f"{signal_name} again" if second else f"the stop's checkpoint not saved within {waited:.0f} s"
        return f"hpc-train: stopping at once ({cause}): the stop's checkpoint was not finished"
    cause = f"{signal_name} again" if second else f"no step boundary within {waited:.0f} s of {signal_name}"
    return (f"hpc-train: stopping at once ({cause}): the training step never returned (its input stopped "
            "flowing, or a collective waits for a peer); nothing saved since the last checkpoint")


def _quietly(record: Callable[[str, str], None], signal_name: str, line: str) -> None:
    try:
        record(signal_name, line)
    except Exception:  # noqa: BLE001 - the process ends whatever the record's trouble
        pass


def _end_now(line: str, code: int) -> None:
    """End the process from the watcher thread: the main thread is stuck in C++, so no exception can reach it.
    The rank log's filter is drained first: os._exit skips atexit, and a cluster ends the filter with the task."""
    from hpc_train.bootstrap.stderr_filter import drain

    sys.stdout.flush()
    print(line, file=sys.stderr, flush=True)
    drain()
    os._exit(code)


class StopSignals:
    """The first and strongest stop request this process received (kind and signal name)."""

    def __init__(self, grace: Grace = Grace(), end: Callable[[str, int], None] = _end_now,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.kind: StopKind | None = None
        self.signal_name: str | None = None
        self._grace, self._end, self._clock = grace, end, clock
        self._watching: tuple[socket.socket, socket.socket] | None = None
        self._last_boundary: float | None = None
        self._longest_stretch = 0.0
        self._boundary_after_stop = False
        self._before_ending: Callable[[str, str], None] | None = None

    def install(self) -> "StopSignals":
        """Handle every signal in KINDS from now on (they would otherwise end the process)."""
        for signum in KINDS:
            signal.signal(signum, self._note)
        if self._watching:
            signal.set_wakeup_fd(self._watching[1].fileno(), warn_on_full_buffer=False)
        return self

    def watch(self, before_ending: Callable[[str, str], None] | None = None) -> "StopSignals":
        """From now on, end the process at once on a second stop, or when no step boundary comes in the grace
        period after the first (call install first; from the main thread). `before_ending(signal name, line)`
        runs first, on the watcher thread: what the run records of it (a failure there does not stop the end)."""
        self._before_ending = before_ending or self._before_ending
        if self._watching:
            return self
        # A stop asked before the watch began: its grace starts now (looked at before the fd can count it again).
        first = (self.signal_name or "SIGTERM", self._clock()) if self.kind is StopKind.STOP else None
        reader, writer = socket.socketpair()
        writer.setblocking(False)
        self._watching = (reader, writer)
        signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        threading.Thread(target=self._watch, args=(reader, first), name="hpc-train stop watcher",
                         daemon=True).start()
        return self

    def close(self) -> None:
        """Stop watching (the thread ends with its socket)."""
        if self._watching:
            signal.set_wakeup_fd(-1)
            for end in self._watching:
                end.close()
            self._watching = None

    def requested(self) -> StopKind | None:
        """The request, as a step boundary looks at it (StopAtStepBoundary); the stretches between boundaries
        size the grace period, and a stop seen here is being acted on."""
        now = self._clock()
        if self._last_boundary is not None:
            self._longest_stretch = max(self._longest_stretch, now - self._last_boundary)
        self._last_boundary = now
        if self.kind is not None:
            self._boundary_after_stop = True
        return self.kind

    def _note(self, signum: int, frame: FrameType | None) -> None:
        kind = KINDS[signal.Signals(signum)]
        if signum == signal.SIGINT and self.kind is StopKind.STOP and not self._watching:
            raise KeyboardInterrupt  # asked twice: stop now, without a checkpoint (the watcher does it when on)
        if self.kind is None or kind > self.kind:
            self.kind, self.signal_name = kind, signal.Signals(signum).name

    def _watch(self, reader: socket.socket, first: tuple[str, float] | None) -> None:
        """The watcher thread: stop signals from the wakeup fd (first: the first one's name and time); it ends
        the process when the rules say."""
        while True:
            timeout = None if first is None else max(0.0, self._deadline(first[1]) - self._clock())
            try:
                ready, _, _ = select.select([reader], [], [], timeout)
                received = reader.recv(64) if ready else b""
            except (OSError, ValueError):
                return  # closed
            if ready and not received:
                return
            for signum in received:
                if KINDS.get(signum) is not StopKind.STOP:  # type: ignore[call-overload]
                    continue
                name = signal.Signals(signum).name
                if first is not None and self._clock() - first[1] < self._grace.same_request_seconds:
                    continue
                if first is not None:
                    return self._end_at_once(name, stuck_line(name, True, self._boundary_after_stop, 0.0), signum)
                first = (name, self._clock())
            if first is not None and not received and self._clock() >= self._deadline(first[1]):
                waited = self._clock() - first[1]
                number = signal.Signals[first[0]].value
                return self._end_at_once(first[0], stuck_line(first[0], False, self._boundary_after_stop, waited),
                                         number)

    def _end_at_once(self, signal_name: str, line: str, signum: int) -> None:
        if self._before_ending is not None:
            # On a thread of its own, waited for a moment only: the file system it writes to may be what hangs.
            record = threading.Thread(target=_quietly, args=(self._before_ending, signal_name, line),
                                      name="hpc-train stop record", daemon=True)
            record.start()
            record.join(self._grace.record_seconds)
        self._end(line, 128 + signum)

    def grace_seconds(self) -> float:
        """How long a stop waits now: for its step boundary, or, once that came, for its checkpoint."""
        if self._boundary_after_stop:
            return self._grace.saving_seconds
        return self._grace.for_boundary(self._longest_stretch)

    def _deadline(self, since: float) -> float:
        return since + self.grace_seconds()
