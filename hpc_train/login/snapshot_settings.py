"""The settings as a job running in its code snapshot reads them (runs/snapshot.py takes and stores the snapshot).

A task file becomes its copy in the snapshot (one the snapshot lacks is refused before anything is queued); a
relative data_dir stays where it was, since data is not code.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from hpc_train.config import TrainConfig
from hpc_train.errors import HpcTrainError
from hpc_train.runs.snapshot import JobCode


def settings_in_snapshot(config: TrainConfig, code: JobCode) -> TrainConfig:
    """The settings as a job running in the snapshot reads them: a task file from its copy (an absolute path in
    the tree becomes the copy's; one the snapshot lacks is refused now), a relative data_dir where it was."""
    from hpc_train.training.usertask import is_file_spec

    task = config.task
    in_copy = Path(os.path.normpath(code.snapshot.workdir / Path(task).expanduser()))
    if is_file_spec(task) and in_copy.is_relative_to(code.snapshot.files) and in_copy.is_file():
        pass  # its copy is there, from the workdir where the ranks run (--in-snapshot from a subfolder too)
    elif is_file_spec(task):
        named = Path(os.path.normpath(code.submit_dir / Path(task).expanduser()))
        # Already in the snapshot (--in-snapshot: submitted from its copy): it is its own copy.
        copy = named if named.is_relative_to(code.snapshot.files) else code.tree_path(named)
        if copy is not None and code.snapshot.files.is_dir() and not copy.is_file():
            raise HpcTrainError(f"task {task}: not in the code snapshot (git-ignored, or --snapshot-exclude?); "
                                "let git see it (git add, or remove it from .gitignore), or submit with --no-snapshot")
        # In the tree: its copy (relative: from the workdir, where the ranks run); outside: where it is.
        task = str(named) if copy is None else task if not Path(task).is_absolute() else str(copy)
    data_dir = config.data_dir
    if data_dir and not Path(data_dir).expanduser().is_absolute():
        data_dir = str(code.submit_dir / data_dir)  # data is not code: where it was
    return replace(config, task=task, data_dir=data_dir)
