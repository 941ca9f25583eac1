"""What a run folder records of the code and the software its job ran: provenance.json (and provenance.diff).

    {"commit": "<full hash>" | null, "dirty": bool, "snapshot": {"digest": ..., "path": ...} | null,
     "submit_dir": "...", "hpc_train": "0.1.dev415+g9f8e7d6", "tensorflow": "2.16.1" | null, "python": "3.11.7"}

Written at submit time, for every job and each element of a sweep, with git's word then; the job's first attempt
replaces the versions with its own Python's ("versions_from": "job"): the login node's may differ or lack
TensorFlow. The versions are read from package metadata
(importlib.metadata), never by importing TensorFlow: a login node's command starts without it.
"""

from __future__ import annotations

import json
import platform
import shutil
from importlib import metadata
from pathlib import Path

from hpc_train.runs.folders import PROVENANCE
from hpc_train.runs.snapshot import Snapshot, git_state, read_manifest
from hpc_train.runs.state import write_text_atomically

PROVENANCE_DIFF = "provenance.diff"
# TensorFlow's distributions, the first installed one's version is the one recorded.
TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-macos", "tf-nightly")


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, str | None]:
    """hpc-train's, TensorFlow's (None when it is not installed) and Python's versions, here."""
    tensorflow = next(filter(None, map(_version, TENSORFLOW_DISTRIBUTIONS)), None)
    return {"hpc_train": _version("hpc-train"), "tensorflow": tensorflow, "python": platform.python_version()}


def provenance(snapshot: Snapshot | None, submit_dir: Path) -> tuple[dict, str]:
    """The record and the uncommitted diff of a job submitted from `submit_dir`: its snapshot's (snapshot.json:
    what git said when it was taken), else, without a snapshot, git's word on `submit_dir` now."""
    if snapshot is not None:
        manifest = read_manifest(snapshot)
        git = {"commit": manifest.get("commit"), "dirty": bool(manifest.get("dirty")), "diff": manifest["diff"]}
        where: dict | None = {"digest": snapshot.digest, "path": str(snapshot.root), "workdir": str(snapshot.workdir)}
    else:
        commit, diff = git_state(submit_dir) if shutil.which("git") else (None, "")
        git = {"commit": commit, "dirty": bool(diff), "diff": diff}  # (untracked files: no snapshot holds them)
        where = None
    record = {"commit": git["commit"], "dirty": git["dirty"], "snapshot": where,
              "submit_dir": str(submit_dir.absolute()), **versions()}
    return record, git["diff"]


def record_job_versions(folder: Path) -> None:
    """The versions of the Python running the job, into submit's provenance.json, on the job's first attempt only
    (a requeue keeps what the first recorded); the submit-time git fields stay."""
    path = folder / PROVENANCE
    if not path.is_file():
        return
    record = json.loads(path.read_text())
    if record.get("versions_from") != "job":
        write_text_atomically(path, json.dumps({**record, **versions(), "versions_from": "job"}, indent=2) + "\n")


def write_provenance(folder: Path, record: dict, diff: str) -> None:
    """provenance.json into the run folder, and provenance.diff when there is an uncommitted diff."""
    write_text_atomically(folder / PROVENANCE, json.dumps(record, indent=2) + "\n")
    if diff:
        write_text_atomically(folder / PROVENANCE_DIFF, diff)
