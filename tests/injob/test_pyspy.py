"""A user's command's stacks on a hang: its supervisor answers the watchdog with py-spy's dump, or says why not;
and `status` reads py-spy's format as it reads faulthandler's."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hpc_train.injob import pyspy
from hpc_train.injob.supervisor import CommandJob, supervised_arguments
from hpc_train.runs import stacks
from hpc_train.injob import watchdog
from tests.injob.test_watchdog import hung_job

SPIED = """rank 0, attempt 1, pid 41, 2026-11-25 06:36:44
Process 42: /v/bin/python /home/me/train.py
Python v3.11.7 (/usr/bin/python3.11)

Thread 42 (idle): "MainThread"
    wait (/usr/lib/python3.11/threading.py:327)
    waits_for_data (/home/me/train.py:4)
    <module> (/home/me/train.py:9)
Thread 43 (active): "loader"
    read (/v/lib/python3.11/site-packages/fs/io.py:12)
"""


@pytest.fixture(autouse=True)
def sigterm_as_it_was() -> object:
    """The body's epilogue ignores SIGTERM to its end: not in the tests after."""
    before = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, before)


# py-spy 0.4.3's error on a refused ptrace (`strings $(which py-spy)`), as `spy` passes it on.
PY_SPY_REFUSED = ("Permission Denied: Try running again with elevated permissions by going "
                  """'sudo env "PATH=$PATH" !!'""")


def test_py_spys_dump_gives_the_runs_own_frames_as_faulthandlers_does() -> None:
    assert stacks.top_frames(SPIED, 2) == ['File "/home/me/train.py", line 4 in waits_for_data',
                                           'File "/home/me/train.py", line 9 in <module>']
    # Without frames of its own: the main thread's innermost, which py-spy lists first, named or not.
    library = SPIED.replace("/home/me/", "/v/lib/python3.11/site-packages/")
    assert stacks.top_frames(library, 1) == ['File "/usr/lib/python3.11/threading.py", line 327 in wait']
    unnamed = library.replace(': "MainThread"', "").replace(': "loader"', "")
    assert stacks.top_frames(unnamed, 1) == ['File "/usr/lib/python3.11/threading.py", line 327 in wait']
    assert stacks.frame_line("    <module> (/home/me/train.py)") == 'File "/home/me/train.py" in <module>'
    assert stacks.frame_line("Python v3.11.7 (/usr/bin/python3.11)") is None


def test_the_commands_processes_are_it_and_what_it_started_each_before_its_children() -> None:
    parents = {10: 1, 12: 10, 11: 10, 30: 12, 20: 11, 99: 2}
    assert pyspy.descendants(10, parents) == [10, 11, 12, 20, 30]
    assert pyspy.descendants(7, parents) == [7]


def test_without_stacks_the_file_says_why_and_what_to_do() -> None:
    missing = pyspy.why_not(42, None, {}, 1)
    assert missing.startswith("No Python stacks for this rank's command (pid 42): py-spy is not installed")
    assert "pip install py-spy" in missing and "answer_requests" in missing
    # py-spy 0.4.3's own words (its binary's strings) for a refused ptrace, "Error: " taken off by `spy`.
    refused = pyspy.why_not(42, "/v/bin/py-spy", {42: PY_SPY_REFUSED}, 2)
    assert "ptrace was refused (pid 42: Permission Denied); Yama's ptrace_scope is 2" in refused
    assert "sudo" not in refused and "elevated" not in refused  # py-spy's hint is no fix for a job
    assert "CAP_SYS_PTRACE" in refused and "ptrace_scope" in refused
    assert "ptrace was refused" in pyspy.why_not(42, "/v/bin/py-spy", {42: "Operation not permitted (os error 1)"}, 0)
    # A wrapper's child, refused under ptrace_scope 1 (Yama's exception is the command's own process's only).
    wrapped = pyspy.why_not(10, "/v/bin/py-spy", {10: "Failed to find python version from target process",
                                                  11: PY_SPY_REFUSED}, 1)
    assert ("py-spy was refused the processes the command started (pid 11): under Yama's ptrace_scope 1 without "
            "CAP_SYS_PTRACE only the command's own process (pid 10) can be read") in wrapped
    assert "a wrapper script should `exec python ...`" in wrapped and "\n" not in wrapped
    assert pyspy.started_refused(10, {10: PY_SPY_REFUSED, 12: "Failed to find python version"}, 1) == ""
    assert pyspy.started_refused(10, {10: PY_SPY_REFUSED, 12: PY_SPY_REFUSED}, 1) == ""  # not Yama's exception then
    # Under another scope (or no Yama) the child's refusal is not Yama's exception: no advice to exec.
    for scope in (0, 2, None):
        other = pyspy.why_not(10, "/v/bin/py-spy", {10: "Failed to find python version from target process",
                                                   11: PY_SPY_REFUSED}, scope)
        assert "ptrace was refused" in other and "only the command's own process (pid 10)" not in other, other
        assert "exec python" not in other, other
    assert "This refusal is not Yama's" in pyspy.why_not(42, "/v/bin/py-spy", {42: PY_SPY_REFUSED}, 0)
    assert "ask the nodes' admins for Yama's ptrace_scope 1" in pyspy.why_not(42, "/v/bin/py-spy",
                                                                              {42: PY_SPY_REFUSED}, 2)
    assert "read no Python process among its 1 (pid 7: Failed to find python version" in pyspy.why_not(
        7, "/v/bin/py-spy", {7: "Failed to find python version from target process"}, None)
    assert "\n" not in refused  # one paragraph


def test_a_command_that_is_not_python_gets_the_paragraph_from_py_spy_itself(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        pyspy.record(tmp_path, 1, 0, sleeper.pid, os.environ, time.monotonic() + pyspy.DUMPS_SECONDS)
    finally:
        sleeper.kill()
        sleeper.wait()
    text = stacks.stacks_file(tmp_path, 1, 0).read_text()
    assert text.startswith(f"rank 0, attempt 1, pid {sleeper.pid}, ")
    assert f"No Python stacks for this rank's command (pid {sleeper.pid}): py-spy read no Python process" in text


def test_all_the_dumps_of_one_request_end_well_before_the_watchdog_ends_the_step() -> None:
    # Seen up to a poll late, the command's own answer waited for, then every dump: inside the watchdog's wait.
    latest = stacks.POLL_SECONDS + pyspy.OWN_ANSWER_SECONDS + pyspy.DUMPS_SECONDS + pyspy.REAP_SECONDS
    assert latest <= watchdog.STACKS_WAIT_SECONDS - 0.5
    assert pyspy.dump_timeout(100.0, 90.0) == pyspy.DUMP_SECONDS  # a dump's own limit first
    assert pyspy.dump_timeout(100.0, 98.5) == 1.5  # then what is left of the request's
    assert pyspy.dump_timeout(100.0, 99.8) is None and pyspy.dump_timeout(100.0, 101.0) is None


# A py-spy that reads the command (FIRST) at once, and never finishes with what it started.
FAKE_PY_SPY = """#!/bin/sh
echo "$$ $*" >> "$0.log"
if [ "$3" = FIRST ]; then
    printf 'Process FIRST: python train.py\\nThread FIRST (idle): "MainThread"\\n    waits_for_data (/me/train.py:4)\\n'
    exit 0
fi
exec sleep 30
"""

# A command and the two processes it started, their pids on a line once started.
PARENT = """import subprocess
started = [subprocess.Popen(["sleep", "30"]) for _ in range(2)]
print(*(child.pid for child in started), flush=True)
started[0].wait()
"""


@pytest.fixture
def slow_py_spy(tmp_path: Path) -> object:
    """A command with two processes it started, a fake py-spy reading it; (its pid, the fake)."""
    command = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    assert command.stdout is not None
    started = [int(pid) for pid in command.stdout.readline().split()]
    fake = tmp_path / "py-spy"
    fake.write_text(FAKE_PY_SPY.replace("FIRST", str(command.pid)))
    fake.chmod(0o755)
    yield command.pid, started, fake
    log = Path(f"{fake}.log")  # the fake's sleeps, left by a supervisor killed meanwhile
    for pid in started + [int(line.split()[0]) for line in (log.read_text() if log.exists() else "").splitlines()]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    command.kill()
    command.wait()


def test_a_dump_out_of_time_keeps_those_before_it(tmp_path: Path, slow_py_spy: tuple[int, list[int], Path],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    pid, started, fake = slow_py_spy
    monkeypatch.setattr(pyspy, "py_spy", lambda environ: str(fake))
    began = time.monotonic()
    pyspy.record(tmp_path, 1, 0, pid, os.environ, began + 1.5)  # one deadline for all three
    assert time.monotonic() - began < 2.5  # (the second's dump took what was left: none for the third)
    text = stacks.stacks_file(tmp_path, 1, 0).read_text()
    assert f'Thread {pid} (idle): "MainThread"\n    waits_for_data (/me/train.py:4)\n' in text
    assert f"py-spy ran out of time (pid {started[0]}: py-spy took over 1." in text
    assert f"; pid {started[1]}: not read: out of time by the request's 6 s)" in text
    assert "py-spy was reading" not in text
    assert all("--nonblocking" in line for line in Path(f"{fake}.log").read_text().splitlines())


ANSWERS = """import os, sys
from pathlib import Path
from hpc_train.injob import pyspy
from hpc_train.runs import stacks
pyspy.OWN_ANSWER_SECONDS = 0.0
pyspy.py_spy = lambda environ: sys.argv[1]
stacks.request_stacks(Path(sys.argv[2]), 1)
pyspy.answer_for(int(sys.argv[3]), os.environ)(Path(sys.argv[2]), 1, 0)
"""


def test_an_answer_cut_short_by_the_steps_end_keeps_the_dumps_made(tmp_path: Path,
                                                                     slow_py_spy: tuple[int, list[int], Path]) -> None:
    pid, started, fake = slow_py_spy
    supervisor = subprocess.Popen([sys.executable, "-c", ANSWERS, str(fake), str(tmp_path), str(pid)],
                                  env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    log = Path(f"{fake}.log")
    while not log.exists() or len(log.read_text().splitlines()) < 2:  # reading what the command started
        assert supervisor.poll() is None and time.sleep(0.05) is None
    supervisor.kill()  # as the step's end does
    supervisor.wait()
    text = stacks.stacks_file(tmp_path, 1, 0).read_text()
    assert text.startswith(f"rank 0, attempt 1, pid {pid}, ") and "waits_for_data (/me/train.py:4)" in text
    assert f"(py-spy was reading pid {started[0]} when the step ended" in text


COMMAND = """
import time
def waits_for_data():
    print("waiting for data", flush=True)
    while True:
        time.sleep(0.2)
waits_for_data()
"""


def test_a_hung_commands_stacks_come_from_py_spy_through_its_supervisor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cmd.py").write_text(COMMAND)
    run_dir = tmp_path / "run"
    # A wrapper that execs Python, as docs/command.md asks: under Yama's ptrace_scope 1 without CAP_SYS_PTRACE the
    # command's own process is the only one py-spy may read (a wrapper's child is not: test_without_stacks_...).
    job = CommandJob(("sh", "-c", f"exec {shlex.quote(sys.executable)} {shlex.quote(str(tmp_path / 'cmd.py'))}"))
    assert hung_job(monkeypatch, run_dir, [sys.executable, "-m", "hpc_train", *supervised_arguments(job)], 6.0) == 143

    assert "hpc-train: hung: no progress on any rank for 3 s" in capsys.readouterr().err
    for rank in (0, 1):
        dump = stacks.stacks_file(run_dir, 1, rank).read_text()
        assert dump.startswith(f"rank {rank}, attempt 1, pid ") and "Python v3" in dump, dump
        assert f"waits_for_data ({tmp_path / 'cmd.py'}:6)" in dump, dump
        pid = dump.split(", pid ", 1)[1].split(",", 1)[0]
        assert f"\nProcess {pid}: " in dump, dump  # the Python read is the command's own process
    assert stacks.newest_chief_top(run_dir, 1) == ("attempt-1-rank-0.txt",
                                                  [f'File "{tmp_path / "cmd.py"}", line 6 in waits_for_data'])


def test_a_command_that_answered_for_itself_keeps_its_answer(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pyspy, "OWN_ANSWER_SECONDS", 0.0)
    (tmp_path / "cmd.py").write_text(COMMAND)
    command = subprocess.Popen([sys.executable, str(tmp_path / "cmd.py")], stdout=subprocess.PIPE, text=True)
    try:
        assert command.stdout is not None and command.stdout.readline() == "waiting for data\n"
        stacks.request_stacks(tmp_path, 2)
        answer = pyspy.answer_for(command.pid, os.environ)
        answer(tmp_path, 2, 1)  # nobody answered: py-spy does
        assert "waits_for_data (" in stacks.stacks_file(tmp_path, 2, 1).read_text()
        stacks.stacks_file(tmp_path, 2, 0).write_text("rank 0, attempt 2: its own faulthandler dump\n")
        answer(tmp_path, 2, 0)
        assert stacks.stacks_file(tmp_path, 2, 0).read_text() == "rank 0, attempt 2: its own faulthandler dump\n"
    finally:
        command.kill()
        command.wait()


def test_after_some_dumps_a_refused_child_is_named_with_what_yama_allows() -> None:
    errors = {11: PY_SPY_REFUSED}
    # Something was read: the command is Python itself, its refused children a launcher's or a pool's workers.
    one = pyspy.afterword(10, errors, 1)
    assert "py-spy was refused pid 11: Yama's ptrace_scope is 1" in one and "exec python" not in one, one
    assert "CAP_SYS_PTRACE" in one and "answer_requests" in one
    zero = pyspy.afterword(10, errors, 0)
    assert "py-spy was refused pid 11: Yama's ptrace_scope is 0" in zero and "exec python" not in zero, zero
    assert pyspy.afterword(10, {}, 0) == ""


def test_a_py_spy_that_never_ends_once_killed_is_given_up_on(monkeypatch: pytest.MonkeyPatch) -> None:
    # One stuck in the kernel (a file server that stopped answering) outlives SIGKILL: no wait without a limit.
    waited: list[float | None] = []

    class Stuck:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def communicate(self, timeout: float) -> tuple[str, str]:
            raise subprocess.TimeoutExpired("py-spy", timeout)

        def kill(self) -> None:
            pass

        def wait(self, timeout: float | None = None) -> int:
            waited.append(timeout)
            if timeout is None:
                raise AssertionError("waited for a py-spy that never ends without a limit")
            raise subprocess.TimeoutExpired("py-spy", timeout)

    monkeypatch.setattr(pyspy.subprocess, "Popen", Stuck)
    assert pyspy.spy("/v/bin/py-spy", 7, 1.5) == ("", f"{pyspy.SLOW} 1.5 s")
    assert waited == [pyspy.REAP_SECONDS]


def test_in_an_image_py_spy_is_the_job_s_own_from_its_mounted_scripts_folder(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from hpc_train.injob import pyspy

    monkeypatch.setattr(pyspy.sys, "executable", str(tmp_path / "image" / "usr" / "bin" / "python3"))
    scripts = tmp_path / "venv" / "bin"
    scripts.mkdir(parents=True)
    (scripts / "py-spy").write_text("#!/bin/sh\n")
    (scripts / "py-spy").chmod(0o755)
    assert pyspy.py_spy({"PATH": "/nowhere", "HPC_TRAIN_CONTAINER_BIN": str(scripts)}) == str(scripts / "py-spy")
    assert pyspy.py_spy({"PATH": "/nowhere"}) is None
