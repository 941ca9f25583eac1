"""hpc-train init: a starter project that loads, renders and is never written over by accident."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hpc_train.config import load_config
from tests.fake_slurm import without_slurm


def init(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpc_train", "init", *args], cwd=cwd, env=without_slurm(),
                          capture_output=True, text=True, timeout=60)


def test_the_starter_project_loads_and_its_job_script_parses(tmp_path: Path) -> None:
    assert init("proj", cwd=tmp_path).returncode == 0
    config = load_config(tmp_path / "proj" / "config.yaml")
    assert config.task == str(tmp_path / "proj" / "task.py") and config.strategy == "multiworker"
    script = (tmp_path / "proj" / "job.sbatch").read_text()
    assert "#SBATCH --nodes=2" in script and f"task: {tmp_path / 'proj' / 'task.py'}" in script
    assert subprocess.run(["bash", "-n", str(tmp_path / "proj" / "job.sbatch")]).returncode == 0


def test_files_already_there_are_kept_unless_forced(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "task.py").write_text("# my work\n")
    refused = init("proj", cwd=tmp_path)
    assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1
    assert "proj/task.py is already there; choose another DIR, or pass --force" in refused.stderr
    assert (tmp_path / "proj" / "task.py").read_text() == "# my work\n" and not (tmp_path / "proj" / "job.sbatch").exists()
    assert init("proj", "--force", cwd=tmp_path).returncode == 0
    assert "def build_model" in (tmp_path / "proj" / "task.py").read_text()


def test_a_hidden_folder_gets_a_project_whose_job_is_named_without_the_dot(tmp_path: Path) -> None:
    made = init(".proj", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "#SBATCH --job-name=proj" in (tmp_path / ".proj" / "job.sbatch").read_text()


@pytest.mark.tensorflow
def test_the_starter_reads_the_settings_its_config_shows(tmp_path: Path) -> None:
    """A sweep over the starter's learning_rate or seed must change what trains (it once hard-coded Adam(1e-3))."""
    from dataclasses import replace

    import tensorflow as tf

    from hpc_train.training.usertask import load_task

    assert init("proj", cwd=tmp_path).returncode == 0
    config = load_config(tmp_path / "proj" / "config.yaml")
    shown = yaml.safe_load((tmp_path / "proj" / "config.yaml").read_text())
    assert set(shown) == {"task", "strategy", "epochs", "batch_size", "learning_rate", "seed", "output_dir"}
    task = load_task(config.task)
    rates = [float(task.call("build_model", config=replace(config, learning_rate=rate)).optimizer.learning_rate)
             for rate in (0.01, 0.0001)]
    assert rates == pytest.approx([0.01, 0.0001])
    context = tf.distribute.InputContext()
    first = [next(iter(task.call("train_dataset", context, 4, config=replace(config, seed=seed))))[0].numpy()
             for seed in (0, 1)]
    assert not (first[0] == first[1]).all()
