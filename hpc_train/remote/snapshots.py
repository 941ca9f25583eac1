"""The one plug between a remote submit and the snapshot of the user's code (hpc_train.login.snapshot)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hpc_train.errors import HpcTrainError


def snapshot_here(submit_dir: Path, exclude: Sequence[str]) -> tuple[str, Path, str]:
    """Snapshot the code around `submit_dir` into ./runs/snapshots/: (digest, its folder, the submit dir relative
    to the snapshot's files/, '.' at the top)."""
    try:
        from hpc_train.login.snapshot import take_snapshot
    except ImportError:  # a build without snapshots: the code would not travel with the job
        raise HpcTrainError("this hpc-train cannot snapshot your code, so --remote cannot submit from here; "
                            "upgrade it (pip install -U hpc-train)") from None
    snapshot = take_snapshot(submit_dir, Path("runs"), exclude)
    return snapshot.digest, snapshot.root, snapshot.workdir.relative_to(snapshot.files).as_posix()
