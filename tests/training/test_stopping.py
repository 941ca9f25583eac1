"""Stop requests: the handlers note the strongest request; nothing else happens in them."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from hpc_train.training.stopping import StopKind, StopSignals


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
