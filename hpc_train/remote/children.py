"""The ssh clients this process starts, none outliving it.

A remote that stops answering leaves its ssh client waiting: `submit --remote a,b` moves on without it (its
thread is left behind), and the interpreter's exit does not end a child. Each client is started here, kept in a
set while it runs, and killed at exit if it still runs; the shared connection's master, which persists by design,
is bounded by ssh's own keep-alive (remote/ssh.py).
"""

from __future__ import annotations

import atexit
import subprocess
import threading
from collections.abc import Sequence

_RUNNING: set[subprocess.Popen[str]] = set()
_LOCK = threading.Lock()


def run(argv: Sequence[str], timeout: float, input: str | None = None,  # noqa: A002 (subprocess.run's word)
        stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    """subprocess.run(argv, capture_output=True, text=True, timeout=...) whose child is killed when this process
    exits; TimeoutExpired as subprocess.run raises it (the child killed first)."""
    with subprocess.Popen(argv, stdin=subprocess.PIPE if input is not None else stdin, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as process:
        with _LOCK:
            _RUNNING.add(process)
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise
        finally:
            with _LOCK:
                _RUNNING.discard(process)
    return subprocess.CompletedProcess(list(argv), process.returncode, stdout, stderr)


def running() -> list[int]:
    """The pids of the clients still running (for a test, and for the exit)."""
    with _LOCK:
        return [process.pid for process in _RUNNING]


@atexit.register
def _end_all() -> None:
    """Kill every client still running (a thread left waiting on a silent remote), and reap it."""
    with _LOCK:
        left = list(_RUNNING)
    for process in left:
        process.kill()
    for process in left:
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
