"""A user's command's stacks on a hang: its supervisor answers the watchdog with py-spy's dump, or says why not;
and `status` reads py-spy's format as it reads faulthandler's."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hpc_train.injob import pyspy
from hpc_train.injob.supervisor import CommandJob, supervised_arguments
from hpc_train.runs import stacks
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

PY_SPY_REFUSED = """Permission Denied: Try running again with elevated permissions by going 'sudo env "PATH=$PATH" !!'"""


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
    assert pyspy.started_refused(10, {10: PY_SPY_REFUSED, 12: "Failed to find python version"}) == ""
    assert "read no Python process among its 1 (pid 7: Failed to find python version" in pyspy.why_not(
        7, "/v/bin/py-spy", {7: "Failed to find python version from target process"}, None)
    assert "\n" not in refused  # one paragraph


def test_a_command_that_is_not_python_gets_the_paragraph_from_py_spy_itself(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        stacks.dump_stacks(tmp_path, 1, 0, pyspy.command_stacks(sleeper.pid, os.environ), sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait()
    text = stacks.stacks_file(tmp_path, 1, 0).read_text()
    assert text.startswith(f"rank 0, attempt 1, pid {sleeper.pid}, ")
    assert f"No Python stacks for this rank's command (pid {sleeper.pid}): py-spy read no Python process" in text


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
