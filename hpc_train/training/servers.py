"""The ps and worker ranks of a parameter-server job: serve until the chief is done.

TensorFlow's own recipe (`server.join()`) never returns, so those ranks used to
run until the job's time limit. Here each serves while it can see the chief: it
waits for the chief's port to open, then exits 0 once the port has closed (the
chief's process ended) for a few seconds in a row. Stop signals do not end a
server early: the chief reads the variables from the parameter servers when it
saves its checkpoint, so they stay until it has gone.
"""

from __future__ import annotations

import sys
import time

from hpc_train.training.rank import RankInfo
from hpc_train.training.keras import tf
from hpc_train.training.rendezvous import reachable
from hpc_train.training.stopping import StopSignals
from hpc_train.training.strategy import gpus_unused_note

POLL_SECONDS = 1.0
GONE_AFTER_FAILED_POLLS = 3


def serve_until_chief_leaves(rank: RankInfo, signals: StopSignals, startup_timeout: float = 600.0) -> int:
    """Run this rank's server; return an exit code when the chief is gone (0) or never came (1)."""
    server = tf.distribute.Server(tf.train.ClusterSpec(rank.cluster), job_name=rank.type, task_index=rank.index,
                                  protocol="grpc", start=True)
    signals.install()  # after TensorFlow's, which would take SIGTERM for itself
    if note := gpus_unused_note():  # a worker computes: say it does so on the CPU
        log(rank, note)
    chief = rank.cluster["chief"][0]
    log(rank, f"serving on {rank.address}; waiting for the chief at {chief}")
    if not _wait_until(lambda: reachable(chief), startup_timeout):
        log(rank, f"the chief at {chief} did not come up within {startup_timeout:.0f} s; giving up")
        return 1
    failed = 0
    noted = None
    while failed < GONE_AFTER_FAILED_POLLS:
        time.sleep(POLL_SECONDS)
        failed = 0 if reachable(chief) else failed + 1
        if signals.signal_name != noted:
            noted = signals.signal_name
            log(rank, f"{noted} received: serving on until the chief has saved its checkpoint and left")
    log(rank, f"the chief at {chief} has finished; exiting")
    del server  # its threads end with the process
    return 0


def _wait_until(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(POLL_SECONDS)
    return False


def log(rank: RankInfo, message: str) -> None:
    print(f"[{rank.type} {rank.index}] {message}", file=sys.stderr, flush=True)
