"""A rank's start in an image, through a real `python -m hpc_train`: the image's TensorFlow checked before anything
else (one line naming both versions, exit 2, noted as a refusal no retry repeats), else its versions said."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hpc_train import __version__

NOTES = "notes"


def rank(tmp_path: Path, *, tensorflow: str | None) -> subprocess.CompletedProcess[str]:
    """`python -m hpc_train --version` as a rank in an image would start; `tensorflow`: the image's (a distribution
    first on the path), None: this environment's."""
    path = tmp_path / "image-packages"
    if tensorflow:
        (path / f"tensorflow-{tensorflow}.dist-info").mkdir(parents=True)
        (path / f"tensorflow-{tensorflow}.dist-info" / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: tensorflow\nVersion: {tensorflow}\n")
    env = {**os.environ, "HPC_TRAIN_CONTAINER": "pyxis", "HPC_TRAIN_RUN_DIR": str(tmp_path / "run"),
           "PYTHONPATH": str(path), "SLURM_PROCID": "1"}
    return subprocess.run([sys.executable, "-m", "hpc_train", "--version"], env=env, capture_output=True, text=True,
                          timeout=120)


def test_a_tensorflow_hpc_train_cannot_use_is_refused_at_the_rank_s_start(tmp_path: Path) -> None:
    result = rank(tmp_path, tensorflow="2.12.0")
    assert result.returncode == 2 and not result.stdout
    assert result.stderr.splitlines() == [
        f"hpc-train {__version__}: the pyxis image's TensorFlow 2.12.0 is not one it can use (it needs TensorFlow "
        ">=2.16,<2.22); use an image with one, or an hpc-train made for TensorFlow 2.12.0"]
    [note] = (tmp_path / "run").rglob("rank-1.json")  # what the epilogue reads: a refusal, not retried
    assert json.loads(note.read_text())["kind"] == "refused"


def test_a_usable_tensorflow_is_said_and_the_rank_goes_on(tmp_path: Path) -> None:
    from importlib.metadata import version

    result = rank(tmp_path, tensorflow=None)
    assert result.returncode == 0 and result.stdout.startswith(f"hpc-train {__version__}"), result.stderr
    assert result.stderr.splitlines() == [
        f"hpc-train: in the pyxis image: Python {sys.version.split()[0]}, TensorFlow {version('tensorflow')}"]
