"""Where this laptop sent its jobs: `status`, `logs`, `cancel` and `pull` of a job id follow it to its cluster
without `--remote`, and `list` names them.

$XDG_CONFIG_HOME/hpc-train/jobs.json (beside remotes.yaml; the user's alone, mode 0600), written whole under a
lock, then renamed. Two clusters may both have a job 1234: a bare id is the most recent submission from this
laptop that got it (a submission here, to this machine's own Slurm, counts too, once the file exists);
`--remote NAME` overrides it.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hpc_train.remote.config import config_file

KEPT = 500  # the newest submissions remembered
HERE = ""  # the remote of a job submitted to this machine's own Slurm


@dataclass(frozen=True)
class Sent:
    """One submission from this laptop: the job's id, the remote it went to (HERE: none), when."""

    job: str
    remote: str
    time: float


def memory_file(environ: Mapping[str, str]) -> Path:
    return config_file(environ).with_name("jobs.json")


def parse(text: str) -> list[Sent]:
    """The submissions a jobs.json holds, oldest first; what is not ours reads as none (pure)."""
    try:
        rows = json.loads(text).get("jobs", [])
    except (ValueError, AttributeError):
        return []
    return [Sent(str(row["job"]), str(row.get("remote") or HERE), float(row.get("time") or 0))
            for row in rows if isinstance(row, dict) and row.get("job")] if isinstance(rows, list) else []


def read(environ: Mapping[str, str]) -> list[Sent]:
    try:
        return parse(memory_file(environ).read_text())
    except OSError:
        return []


def remember(job: str, remote: str, environ: Mapping[str, str], only_if_kept: bool = False) -> None:
    """Add a submission (`only_if_kept`: only where this laptop already keeps the file: a login node that never
    sent a job anywhere keeps none)."""
    path = memory_file(environ)
    if only_if_kept and not path.is_file():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(".jobs.json.lock"), "a") as lock:  # two submits at once: neither loses the other's
        fcntl.flock(lock, fcntl.LOCK_EX)
        rows = [*read(environ), Sent(job, remote, round(time.time(), 3))][-KEPT:]
        text = json.dumps({"jobs": [row.__dict__ for row in rows]}, indent=1) + "\n"
        handle, partial = tempfile.mkstemp(dir=path.parent, prefix=".jobs.json.")  # mode 0600
        with os.fdopen(handle, "w") as file:
            file.write(text)
        os.replace(partial, path)


def where(job: str | None, environ: Mapping[str, str]) -> str | None:
    """The remote the most recent submission of this job id went to (an array element's id, 1234_5: its array's);
    None when this laptop sent none, or its latest went to this machine's own Slurm."""
    if not job:
        return None
    wanted = job.split("_", 1)[0]
    found = next((row for row in reversed(read(environ)) if row.job == wanted), None)
    return found.remote or None if found else None


def list_lines(environ: Mapping[str, str]) -> list[str]:
    """`list`'s lines for the jobs sent to remotes, newest first (none: no lines)."""
    rows = [row for row in reversed(read(environ)) if row.remote][:20]
    if not rows:
        return []
    return ["sent from here (hpc-train status JOBID follows each to its remote):",
            *(f"  {row.job:<10} {row.remote:<16} {time.strftime('%Y-%m-%d %H:%M', time.localtime(row.time))}"
              for row in rows)]
