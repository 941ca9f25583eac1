"""Where a rank of the trainer writes: the run folder for the chief, its own scratch folder for the others."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from hpc_train.training.rank import RankInfo


@dataclass(frozen=True)
class RunPaths:
    """Where this rank writes: the output directory for the chief, scratch for the others.

    Other MultiWorkerMirrored workers take part in every save (a save may need
    all of them) but write into their own scratch directory, removed at the end.
    """

    output: Path
    rank: RankInfo

    @property
    def writes(self) -> Path:
        if self.rank.is_chief:
            return self.output
        return self.output / ".scratch" / f"{self.rank.type}-{self.rank.index}"

    @property
    def checkpoints(self) -> Path:
        return self.output / "checkpoints"  # every rank restores from the chief's

    @property
    def model(self) -> Path:
        return self.writes / "model.keras"

    def remove_scratch(self) -> None:
        if not self.rank.is_chief:
            shutil.rmtree(self.writes, ignore_errors=True)
            _remove_if_empty(self.writes.parent)


def _remove_if_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass
