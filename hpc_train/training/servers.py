"""The ps and worker tasks of a parameter-server job: serve until the chief is done.

TensorFlow's own recipe (`server.join()`) never returns, so those tasks used to
run until the job's time limit. Here each serves while it can see the chief: it
waits for the chief's port to open, then exits 0 once the port has closed (the
chief's process ended) for a few seconds in a row.
"""

from __future__ import annotations

import socket
import sys
import time

from hpc_train.training.cluster import TaskInfo
from hpc_train.training.keras import tf

POLL_SECONDS = 1.0
GONE_AFTER_FAILED_POLLS = 3


def serve_until_chief_leaves(task: TaskInfo, startup_timeout: float = 600.0) -> int:
    """Run this task's server; return an exit code when the chief is gone (0) or never came (1)."""
    server = tf.distribute.Server(tf.train.ClusterSpec(task.cluster), job_name=task.type, task_index=task.index,
                                  protocol="grpc", start=True)
    chief = task.cluster["chief"][0]
    log(task, f"serving on {task.address}; waiting for the chief at {chief}")
    if not _wait_until(lambda: _reachable(chief), startup_timeout):
        log(task, f"the chief at {chief} did not come up within {startup_timeout:.0f} s; giving up")
        return 1
    failed = 0
    while failed < GONE_AFTER_FAILED_POLLS:
        time.sleep(POLL_SECONDS)
        failed = 0 if _reachable(chief) else failed + 1
    log(task, f"the chief at {chief} has finished; exiting")
    del server  # its threads end with the process
    return 0


def _wait_until(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(POLL_SECONDS)
    return False


def _reachable(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=POLL_SECONDS):
            return True
    except OSError:
        return False


def log(task: TaskInfo, message: str) -> None:
    print(f"[{task.type} {task.index}] {message}", file=sys.stderr, flush=True)
