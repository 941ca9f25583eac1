"""The one plug between a remote submit and the snapshot of the user's code (hpc_train.runs.snapshot)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hpc_train.runs.snapshot import take_snapshot


def snapshot_here(submit_dir: Path, exclude: Sequence[str], limit_bytes: int) -> tuple[str, Path, str]:
    """Snapshot the code around `submit_dir` into ./runs/snapshots/: (digest, its folder, the submit dir relative
    to the snapshot's files/, '.' at the top)."""
    snapshot = take_snapshot(submit_dir, Path("runs"), exclude, limit_bytes)
    return snapshot.digest, snapshot.root, snapshot.workdir.relative_to(snapshot.files).as_posix()
