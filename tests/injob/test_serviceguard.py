"""The data service's workers watched while the ranks run: a workers' or dispatcher's step that ends is started
again, at most RESTARTS times, one line each; nothing is started once the body stops the service."""

from __future__ import annotations

import subprocess
import threading

import pytest

from hpc_train.injob.serviceguard import DISPATCHER, WORKERS, WorkerGuard


@pytest.mark.parametrize("index, step, line", [
    (1, WORKERS, "data service: its workers' step ended (exit 0) while the ranks ran; started again (restart 1 of at "
                 "most 5); the ranks' input waits meanwhile"),
    (0, DISPATCHER, "data service: its dispatcher's step ended (exit 0) while the ranks ran; started again from its "
                    "journal (restart 1 of at most 5); the ranks' input waits meanwhile"),
], ids=["workers", "dispatcher"])
def test_a_step_that_ends_is_started_again_and_replaced_in_the_steps(index: int, step: tuple[str, str, str],
                                                                    line: str) -> None:
    again: list[subprocess.Popen[bytes]] = []
    said: list[str] = []
    restarted = threading.Event()

    def restart() -> subprocess.Popen[bytes]:
        again.append(subprocess.Popen(["sleep", "60"]))
        restarted.set()
        return again[-1]

    steps: list[object] = ["the other step", "the other step"]
    steps[index] = subprocess.Popen(["true"])
    guard = WorkerGuard(steps, index, restart, said.append, poll=0.05, step=step).start()
    try:
        assert restarted.wait(30)
    finally:
        guard.stop()
    assert steps[index] is again[0] and len(again) == 1  # the running one is what the body ends next
    assert steps[1 - index] == "the other step" and said == [line]
    again[0].kill()
    again[0].wait()


def test_restarts_stop_at_the_limit_with_one_warning() -> None:
    said: list[str] = []
    ended = threading.Event()

    def restart() -> subprocess.Popen[bytes]:
        return subprocess.Popen(["false"])

    def say(line: str) -> None:
        said.append(line)
        if line.startswith("warning"):
            ended.set()

    guard = WorkerGuard([subprocess.Popen(["false"])], 0, restart, say, restarts=2, poll=0.05).start()
    try:
        assert ended.wait(30)
    finally:
        guard.stop()
    assert len(said) == 3 and "restart 2 of at most 2" in said[1]
    assert said[2].startswith("warning: the data service's workers' step ended (exit 1) while the ranks ran, 2 "
                              "restart(s) already: not started again")


def test_nothing_is_started_once_the_body_stops_the_service() -> None:
    running = subprocess.Popen(["sleep", "60"])
    started: list[object] = []
    guard = WorkerGuard([running], 0, lambda: started.append(1), lambda line: None, poll=0.05).start()
    guard.stop()
    running.kill()  # as the body's stop file ends it, after the guard stopped
    running.wait()
    assert not started and not guard._thread.is_alive()


def test_a_restart_srun_refuses_is_one_warning() -> None:
    said: list[str] = []
    done = threading.Event()

    def restart() -> None:
        raise FileNotFoundError("srun")

    def say(line: str) -> None:
        said.append(line)
        done.set()

    guard = WorkerGuard([subprocess.Popen(["true"])], 0, restart, say, poll=0.05).start()
    try:
        assert done.wait(30)
    finally:
        guard.stop()
    assert said == ["warning: the data service's workers could not be started again (FileNotFoundError: srun)"]
