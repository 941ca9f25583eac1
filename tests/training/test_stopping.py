"""Stop requests: the handlers note the strongest request; nothing else happens in them."""

from __future__ import annotations

import os
import re
import signal
import threading
from collections.abc import Iterator

import pytest

from hpc_train.training.stopping import Grace, StopKind, StopSignals, stuck_line


@pytest.fixture
def signals() -> Iterator[StopSignals]:
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM,
                                                               signal.SIGINT)}
    yield StopSignals().install()
    for signum, handler in before.items():
        signal.signal(signum, handler)


def test_nothing_is_requested_until_a_signal_comes(signals: StopSignals) -> None:
    assert (signals.kind, signals.signal_name) == (None, None)


@pytest.mark.parametrize("sent, kind, name", [
    ([signal.SIGUSR1], StopKind.WARNING, "SIGUSR1"),
    ([signal.SIGUSR2], StopKind.WARNING, "SIGUSR2"),  # submitit's warning
    ([signal.SIGTERM], StopKind.STOP, "SIGTERM"),
    ([signal.SIGUSR1, signal.SIGTERM], StopKind.STOP, "SIGTERM"),  # a stop outranks a warning
    ([signal.SIGTERM, signal.SIGUSR1], StopKind.STOP, "SIGTERM"),  # and is not downgraded by one
])
def test_the_strongest_request_is_kept(signals: StopSignals, sent: list[int], kind: StopKind, name: str) -> None:
    for signum in sent:
        os.kill(os.getpid(), signum)  # delivered to this (main) thread before kill returns
    assert (signals.kind, signals.signal_name) == (kind, name)


def test_a_second_ctrl_c_interrupts_at_once(signals: StopSignals) -> None:
    os.kill(os.getpid(), signal.SIGINT)
    assert signals.kind is StopKind.STOP
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)


# The watcher: a step that never returns holds the main thread in C++; a second stop, or the grace period after
# the first, ends the process (here: recorded, not ended).
class Ended:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.event = threading.Event()

    def __call__(self, line: str, code: int) -> None:
        self.calls.append((line, code))
        self.event.set()


class Clock:
    """The watcher's clock, moved by the test alone; it counts the watcher thread's looks at it, so that a test
    waits for the watcher to have taken a signal (or judged its deadline) instead of sleeping for it to."""

    def __init__(self) -> None:
        self.now = 0.0
        self.looks = 0
        self._changed = threading.Condition()

    def __call__(self) -> float:
        now = self.now  # read before the test hears of the look, so that it moves the clock after it
        if threading.current_thread().name == "hpc-train stop watcher":
            with self._changed:
                self.looks += 1
                self._changed.notify_all()
        return now

    def looked(self, count: int) -> bool:
        """Whether the watcher has looked at the clock `count` times in all (waiting for it, up to 10 s)."""
        with self._changed:
            return self._changed.wait_for(lambda: self.looks >= count, timeout=10)

    def looks_again(self, count: int = 2) -> bool:
        """Whether the watcher looks `count` more times from now: two in a row without a signal are a whole turn
        of its loop, so it has judged its deadline at the time the clock says now."""
        return self.looked(self.looks + count)


@pytest.fixture
def watched() -> Iterator[tuple[StopSignals, Ended, Clock]]:
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM,
                                                               signal.SIGINT)}
    ended, clock = Ended(), Clock()
    signals = StopSignals(Grace(floor_seconds=0.5, stretches=3.0, saving_seconds=0.5, same_request_seconds=0.0),
                          end=ended, clock=clock)
    yield signals.install().watch(), ended, clock
    signals.close()
    for signum, handler in before.items():
        signal.signal(signum, handler)


def test_a_second_term_ends_the_process_at_once_saying_the_step_never_returned(
        watched: tuple[StopSignals, Ended, Clock]) -> None:
    signals, ended, clock = watched
    os.kill(os.getpid(), signal.SIGTERM)
    assert clock.looked(1)  # the watcher took the first TERM (and noted when)
    assert ended.calls == []  # the first only asks
    os.kill(os.getpid(), signal.SIGTERM)
    assert ended.event.wait(5)  # before the grace period's end: the clock stands still, the grace never ends
    [(line, code)] = ended.calls
    assert line.startswith("hpc-train: stopping at once (SIGTERM again): the training step never returned")
    assert code == 128 + signal.SIGTERM


def test_a_second_ctrl_c_is_the_watchers_too_when_it_watches(watched: tuple[StopSignals, Ended, Clock]) -> None:
    signals, ended, clock = watched
    os.kill(os.getpid(), signal.SIGINT)
    os.kill(os.getpid(), signal.SIGINT)  # no KeyboardInterrupt in the main thread: the watcher ends it
    assert ended.event.wait(5)
    assert ended.calls[0][1] == 128 + signal.SIGINT and "SIGINT again" in ended.calls[0][0]


def test_without_a_step_boundary_the_grace_period_ends_the_process(
        watched: tuple[StopSignals, Ended, Clock]) -> None:
    signals, ended, clock = watched
    os.kill(os.getpid(), signal.SIGTERM)
    assert clock.looked(1)
    clock.now = 0.4  # within the grace period (0.5 s): not yet
    assert clock.looks_again() and ended.calls == []
    clock.now = 0.6  # past it
    assert ended.event.wait(5)
    [(line, code)] = ended.calls
    assert re.match(r"hpc-train: stopping at once \(no step boundary within [01] s of SIGTERM\): the training step "
                    r"never returned", line), line
    assert code == 128 + signal.SIGTERM


def test_the_grace_period_grows_with_the_longest_stretch_between_step_boundaries() -> None:
    now = [0.0]
    signals = StopSignals(Grace(floor_seconds=60.0), clock=lambda: now[0])
    for moment in (10.0, 12.0, 50.0, 51.0):  # stretches of 2, 38 and 1 s
        now[0] = moment
        assert signals.requested() is None
    assert signals.grace_seconds() == 114.0  # three times the longest
    assert StopSignals(Grace(floor_seconds=60.0)).grace_seconds() == 60.0  # none seen yet: the floor


def test_once_the_stop_reaches_a_step_boundary_the_timer_gives_its_checkpoint_time() -> None:
    ended, clock = Ended(), Clock()
    signals = StopSignals(Grace(floor_seconds=0.3, saving_seconds=1.5, same_request_seconds=0.0), end=ended,
                          clock=clock)
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    signals.install().watch()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert clock.looked(1)
        assert signals.requested() is StopKind.STOP  # the boundary came: the run saves and leaves in order
        clock.now = 1.0  # past the step's grace, within the saving's
        assert clock.looks_again() and ended.calls == []
        os.kill(os.getpid(), signal.SIGTERM)  # a second stop still ends it
        assert ended.event.wait(5)
        assert ended.calls[0][0] == ("hpc-train: stopping at once (SIGTERM again): the stop's checkpoint was not "
                                     "finished")
    finally:
        signals.close()
        for signum, handler in before.items():
            signal.signal(signum, handler)


def test_the_line_is_one_line_naming_the_cause() -> None:
    line = stuck_line("SIGTERM", False, False, 61.2)
    assert "\n" not in line and "no step boundary within 61 s of SIGTERM" in line
    assert "the training step never returned" in line


def test_a_stop_delivered_twice_at_once_is_one_request() -> None:
    # Slurm may signal a task from its step and again through srun: that is not a user asking twice.
    ended, clock = Ended(), Clock()
    signals = StopSignals(Grace(floor_seconds=30.0, same_request_seconds=0.5), end=ended, clock=clock)
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    signals.install().watch()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert clock.looked(2)  # the first taken (1), the watcher waiting again (2)
        os.kill(os.getpid(), signal.SIGTERM)  # at the same moment, as the clock says
        assert clock.looked(4) and ended.calls == []  # judged the same request (3), waiting again (4)
        clock.now = 1.0
        os.kill(os.getpid(), signal.SIGTERM)  # asked again, later: now it is a second stop
        assert ended.event.wait(5) and "SIGTERM again" in ended.calls[0][0]
    finally:
        signals.close()
        for signum, handler in before.items():
            signal.signal(signum, handler)


def test_what_the_run_records_comes_before_the_end_and_its_failure_does_not_stop_it() -> None:
    ended, recorded = Ended(), []

    def record(signal_name: str, line: str) -> None:
        recorded.append((signal_name, line, list(ended.calls)))  # ended.calls still empty: recorded first
        raise OSError("a full disk")  # must not keep the process from ending

    clock = Clock()
    signals = StopSignals(Grace(floor_seconds=30.0, same_request_seconds=0.0), end=ended, clock=clock)
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    signals.install().watch(record)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert clock.looked(1)
        os.kill(os.getpid(), signal.SIGTERM)
        assert ended.event.wait(5)
        [(name, line, calls_then)] = recorded
        assert name == "SIGTERM" and calls_then == [] and line == ended.calls[0][0]
    finally:
        signals.close()
        for signum, handler in before.items():
            signal.signal(signum, handler)


def test_a_record_that_hangs_delays_the_end_by_its_allowance_only() -> None:
    ended, release, returned, clock = Ended(), threading.Event(), threading.Event(), Clock()
    signals = StopSignals(Grace(floor_seconds=30.0, same_request_seconds=0.0, record_seconds=0.3), end=ended,
                          clock=clock)
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}

    def hangs(name: str, line: str) -> None:  # a file system that stopped answering
        release.wait(30)
        returned.set()

    signals.install().watch(hangs)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert clock.looked(1)
        os.kill(os.getpid(), signal.SIGTERM)
        assert ended.event.wait(5) and not returned.is_set()  # ended while the record still hangs
    finally:
        release.set()
        signals.close()
        for signum, handler in before.items():
            signal.signal(signum, handler)
