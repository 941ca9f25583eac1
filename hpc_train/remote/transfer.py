"""Files to and from a remote with rsync over the shared connection: a submit's snapshot there, a job's run
folders back. rsync copies only what changed, so a snapshot already there costs one round trip."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

from hpc_train.errors import HpcTrainError
from hpc_train.remote import scripts
from hpc_train.remote.config import Remote
from hpc_train.remote.run import ask, connect
from hpc_train.remote.ssh import SSH_FAILED, failure, rsync_argv
from hpc_train.runs.snapshot import SNAPSHOTS

JOB_ID = re.compile(r"[0-9]+(_[0-9]+)?")


def _rsync(remote: Remote, argv: list[str], what: str, environ: Mapping[str, str]) -> None:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise HpcTrainError("rsync is not installed here: install it (apt-get install rsync, brew install "
                            "rsync)") from None
    if result.returncode == SSH_FAILED:
        raise failure(remote.host, result.stderr, environ)
    if result.returncode != 0:
        said = [line for line in result.stderr.splitlines() if line.strip()]
        if any("command not found" in line or "rsync: not found" in line for line in said):
            raise HpcTrainError(f"rsync is not installed on {remote.host}: ask its admins for it")
        raise HpcTrainError(f"cannot copy {what}: {said[0] if said else f'rsync exit {result.returncode}'}; "
                            f"hpc-train remote check {remote.name} says why")


def snapshot_folder(remote: Remote, digest: str) -> str:
    """A snapshot's folder on the remote: WORKDIR/runs/snapshots/DIGEST."""
    return scripts.joined(remote.workdir, "runs", SNAPSHOTS, digest)


def push_snapshot(remote: Remote, root: Path, digest: str, environ: Mapping[str, str]) -> str:
    """Copy a snapshot's folder (runs/snapshots/DIGEST/) to the same place under the workdir; that place. Only to a
    remote whose hpc-train can then submit it (its protocol): checked before anything is copied."""
    connect(remote, environ, "submit")
    there = snapshot_folder(remote, digest)
    made = ask(remote, scripts.mkdir_script(there), environ)
    if made.returncode != 0:
        said = [line for line in made.stderr.splitlines() if line.strip()]
        raise HpcTrainError(f"cannot make {there} on {remote.host}: {said[-1] if said else made.returncode}")
    _rsync(remote, rsync_argv([f"{root}/"], f"{remote.host}:{scripts.rsync_path(there)}/", environ),
           f"the snapshot to {remote.host}:{there}", environ)
    return there


def run_folders(remote: Remote, job: str, environ: Mapping[str, str]) -> list[str]:
    """The names of a job's run folders in the remote's runs/ (a sweep's: its own and each element's)."""
    if not JOB_ID.fullmatch(job):
        raise HpcTrainError(f"job id {job!r}: give a job's or a sweep's id as submit printed it (123, 123_4)")
    connect(remote, environ)
    names = ask(remote, scripts.folders_script(remote, job), environ).stdout.split()
    if not names:
        raise HpcTrainError(f"no run folder of job {job} in {scripts.joined(remote.workdir, 'runs')} on "
                            f"{remote.host}; hpc-train list --remote {remote.name} shows the jobs there")
    return names


def pull(remote: Remote, job: str, destination: Path, environ: Mapping[str, str]) -> list[str]:
    """Copy a job's run folders into `destination` (./runs); their names."""
    names = run_folders(remote, job, environ)
    runs = scripts.rsync_path(scripts.joined(remote.workdir, "runs"))
    destination.mkdir(parents=True, exist_ok=True)
    sources = [f"{remote.host}:{runs}/{names[0]}", *(f":{runs}/{name}" for name in names[1:])]
    _rsync(remote, rsync_argv(sources, f"{destination}/", environ), f"job {job}'s run folders from {remote.host}",
           environ)
    return names
