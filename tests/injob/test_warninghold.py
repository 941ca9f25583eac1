"""A warning passed on to a command waits until the command catches it (hpc_train/injob/warninghold.py)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hpc_train.injob.warninghold import catches, caught_signals, pass_on

pytestmark = pytest.mark.quick

# Waits for the file $1 to exist, then catches SIGTERM (as TensorFlow's handler does once it is made), says so on
# stdout, and exits 42 when it comes; without $2 it ends by itself once it said so, catching nothing.
LATE_CATCHER = """
import os, signal, sys, time
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
if len(sys.argv) > 2:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(42))
    print("catching", flush=True)
    time.sleep(60)
"""


def started(*args: str) -> subprocess.Popen[bytes]:
    # SIGTERM's default action in the command, as the supervisor's command has it (this test process's own
    # disposition, whatever an earlier test left, is not inherited: an ignored signal would stay ignored).
    return subprocess.Popen([sys.executable, "-c", LATE_CATCHER, *args], stdout=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))


def test_sigcgt_is_read_as_the_signals_caught() -> None:
    assert caught_signals("Name:\tpython\nSigIgn:\t0000000000001000\nSigCgt:\t0000000180004002\n") == {
        2, 15, 32, 33}
    assert caught_signals("Name:\tx\n") == frozenset()


def test_a_warning_sent_while_the_command_starts_reaches_it_once_it_catches_it(tmp_path: Path) -> None:
    go, said, holding = tmp_path / "go", [], threading.Event()
    child = started(str(go), "catch")

    def say(line: str) -> None:
        said.append(line)
        holding.set()

    relay = threading.Thread(target=pass_on, args=(child, signal.SIGTERM), kwargs={"say": say})
    relay.start()  # before the command catches it: sent now, its default action would end it
    assert holding.wait(timeout=30), "the warning was not held"
    go.touch()
    assert child.stdout is not None and child.stdout.readline() == b"catching\n"
    assert child.wait(timeout=30) == 42  # caught: saved, "go on later", not killed
    relay.join(timeout=30)
    assert said[0] == "the time-limit warning waits until the command catches SIGTERM (at most 60 s)"
    assert re.fullmatch(r"passed the time-limit warning on as SIGTERM after \d+\.\d s \(the command catches it\)",
                        said[1]), said


def test_a_command_that_never_catches_it_gets_it_after_the_hold(tmp_path: Path) -> None:
    child, said = started(str(tmp_path / "never")), []
    began = time.monotonic()
    pass_on(child, signal.SIGTERM, at_most=0.5, say=said.append)
    assert time.monotonic() - began >= 0.5  # held the whole time, then sent all the same
    assert child.wait(timeout=30) == -signal.SIGTERM
    assert said[1].endswith("(the command never caught it)"), said


def test_a_command_that_ends_first_is_never_signalled(tmp_path: Path) -> None:
    go = tmp_path / "go"
    child = started(str(go))
    relay = threading.Thread(target=pass_on, args=(child, signal.SIGTERM), kwargs={"at_most": 30})
    relay.start()
    go.touch()
    assert child.wait(timeout=30) == 0
    relay.join(timeout=30)
    assert not relay.is_alive()  # it stopped waiting once the command had ended
