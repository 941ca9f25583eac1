"""What the local cluster's modules share: starting, finding and stopping a daemon, installing what is missing.

Used by control (munged, slurmctld, slurmd) and accounting (MariaDB, slurmdbd);
all of it public, so neither reaches into the other.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from hpc_train.errors import HpcTrainError
from hpc_train.localslurm.spec import LocalCluster

PROGRAMS = ("munged", "slurmctld", "slurmd", "sinfo", "sbatch", "scontrol")
PACKAGES = ("slurm-wlm", "munge")


def say(message: str) -> None:
    print(f"hpc-train cluster: {message}", file=sys.stderr, flush=True)


def running_pid(cluster: LocalCluster, daemon: str) -> int | None:
    try:
        pid = int(cluster.pid_file(daemon).read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None
    return pid if is_daemon(pid, daemon) else None


def slurm_env(cluster: LocalCluster) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": str(cluster.conf)}


def is_daemon(pid: int, daemon: str) -> bool:
    """The pid still belongs to that program (pids are reused)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == daemon.split("-")[0]
    except OSError:
        return False


def install_missing(programs: tuple[str, ...] = PROGRAMS, packages: tuple[str, ...] = PACKAGES,
                     what: str = f"Slurm ({PACKAGES[0]}: slurmctld, slurmd, client) and munge") -> None:
    missing = [program for program in programs if shutil.which(program) is None]
    if not missing:
        return
    if shutil.which("apt-get") is None:
        raise HpcTrainError(f"{', '.join(missing)} not found and no apt-get here: install {what} with this "
                            "system's package manager")
    say(f"installing {' '.join(packages)} with apt-get (about a minute)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
        result = subprocess.run(command, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise HpcTrainError(f"{' '.join(command)} failed ({last}); install {' '.join(packages)} by hand")


def stop(pid: int, daemon: str, grace: float = 10.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if not wait_until(lambda: not alive(pid), grace):
        os.kill(pid, signal.SIGKILL)
    say(f"stopped {daemon}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A stopped daemon can linger as a zombie until its parent (not us) reaps it.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def wait_until(condition: Callable[[], bool], timeout: float, poll: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)


def run(command: list[str], env: Mapping[str, str] | None = None, stdin: str | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run a daemon's tool (mariadb-install-db, slurmdbd, ...); one missing or hanging is a failed run, not an
    exception."""
    try:
        return subprocess.run(command, env=dict(env or os.environ), input=stdin, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(command, 124, "", f"{command[0]} did not answer within {timeout:.0f} s")
    except OSError as error:
        return subprocess.CompletedProcess(command, 127, "", f"cannot run {command[0]}: {error.strerror or error}")
