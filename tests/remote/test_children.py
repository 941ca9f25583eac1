"""No ssh client of hpc-train outlives it: a client left waiting by a thread (a silent remote) is killed at exit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpc_train.remote import children

LEFT_BEHIND = """
import sys, threading, time
from hpc_train.remote import children
threading.Thread(target=children.run, args=(["sleep", "300"],), kwargs={"timeout": 600}, daemon=True).start()
while not children.running():
    time.sleep(0.01)
print(children.running()[0], flush=True)
"""


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, ended but not reaped, does not)."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_client_a_thread_left_waiting_is_killed_when_hpc_train_exits() -> None:
    """(issue 46, 5) a login node that stopped answering kept its ssh client running 80 s after hpc-train exited."""
    done = subprocess.run([sys.executable, "-c", LEFT_BEHIND], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    assert not alive(int(done.stdout)), "the client outlived the process that started it"


def test_a_client_runs_as_subprocess_run_would_and_its_timeout_kills_it() -> None:
    result = children.run([sys.executable, "-c", "import sys; print(sys.stdin.read()[::-1]); sys.exit(3)"],
                          timeout=60, input="abc")
    assert (result.returncode, result.stdout, result.stderr) == (3, "cba\n", "")
    with pytest.raises(subprocess.TimeoutExpired):
        children.run(["sleep", "300"], timeout=0.2)
    assert children.running() == [] and os.getpid() > 0
