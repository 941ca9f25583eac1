"""What the end-to-end tests ask Slurm about a job: its state, waiting for its end, a rank's process."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

def local_cluster_possible() -> bool:
    """Whether the end-to-end tests can bring up their local Slurm here: root, and Slurm or apt-get to install it."""
    return os.geteuid() == 0 and (shutil.which("slurmctld") is not None or shutil.which("apt-get") is not None)


def separate_hosts_impossible() -> str | None:
    """Why a local cluster with separate hosts (a network namespace per node) cannot come up here, or None."""
    if os.geteuid() != 0:
        return "a local Slurm cluster needs root"
    if shutil.which("slurmctld") is None and shutil.which("apt-get") is None:
        return "no Slurm and no apt-get to install it"
    if shutil.which("ip") is None or shutil.which("nsenter") is None:
        return "separate hosts need iproute2 (ip) and nsenter"
    return None


FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED"}
JOB_TIMEOUT = 300


def job_state(job_id: str, env: dict[str, str]) -> tuple[str, str]:
    """(JobState, ExitCode) from scontrol; ("UNKNOWN", "?") once Slurm forgot the job."""
    shown = subprocess.run(["scontrol", "show", "job", "-o", job_id], env=env, capture_output=True, text=True).stdout
    fields = dict(part.split("=", 1) for part in shown.split() if "=" in part)
    return fields.get("JobState", "UNKNOWN"), fields.get("ExitCode", "?")


def wait_for_end(job_id: str, env: dict[str, str], log: Callable[[], str],
                 timeout: float = JOB_TIMEOUT) -> tuple[str, str]:
    """The job's final (state, exit code); cancelled, and the test failed with its log, past `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state, code = job_state(job_id, env)
        if state in FINAL_STATES:
            return state, code
        time.sleep(1)
    subprocess.run(["scancel", job_id], env=env)
    pytest.fail(f"job {job_id} did not finish within {timeout} s:\n{log()[-3000:]}")


def rank_pid(job_id: str, rank: int, wanted: Callable[[str, bytes], bool], conf: str | None = None) -> int | None:
    """The pid of a process of one rank of a job (by its Slurm variables) for which wanted(comm, cmdline). `conf`:
    the job's SLURM_CONF, so that a job of another local cluster with the same id (the clusters of their own run
    beside the session's) is never taken for it."""
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            variables = dict(item.split(b"=", 1) for item in environ.read_bytes().split(b"\0") if b"=" in item)
            comm = (environ.parent / "comm").read_text().strip()
            cmdline = (environ.parent / "cmdline").read_bytes()
        except OSError:
            continue
        other_cluster = conf is not None and variables.get(b"SLURM_CONF", conf.encode()) != conf.encode()
        if (variables.get(b"SLURM_JOB_ID") == job_id.encode() and variables.get(b"SLURM_PROCID") == str(rank).encode()
                and not other_cluster and wanted(comm, cmdline)):
            return int(environ.parent.name)
    return None
