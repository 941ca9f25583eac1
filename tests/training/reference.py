"""A small MNIST run of the trainer, made once a session, for the tests that need one finished run: the
weights an interrupted run must end with, a run folder to resume or damage (each test on its own copy)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.once import made_once
from tests.training.runs import digest, finish, start

# 31 steps an epoch on one process (2,000 images, batches of 64), a step boundary every 4 steps.
SMALL = ("epochs=2", "train_images=2000", "steps_per_execution=4")


@dataclass(frozen=True)
class FinishedRun:
    folder: Path  # the run folder: never written to by a test (copy() it)
    out: str
    err: str

    @property
    def digest(self) -> str:
        return digest(self.err)

    def copy(self, to: Path) -> Path:
        """The run folder copied to `to`, for a test to go on with."""
        shutil.copytree(self.folder, to)
        return to


def _run_small(folder: Path) -> None:
    [(code, out, err)] = finish([start(folder / "run", *SMALL)])
    assert code == 0, err[-3000:]
    (folder / "out").write_text(out)
    (folder / "err").write_text(err)


@pytest.fixture
def small_run(tmp_path_factory: pytest.TempPathFactory) -> FinishedRun:
    """One process, SMALL's 2 epochs run through, uninterrupted (made by the first test of the session to ask)."""
    folder = made_once(tmp_path_factory, "small-mnist-run", _run_small)
    return FinishedRun(folder / "run", (folder / "out").read_text(), (folder / "err").read_text())
