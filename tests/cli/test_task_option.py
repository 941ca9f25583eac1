"""--task on submit and render: the task module a job trains, found from where the command runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from tests.fake_slurm import without_slurm


def hpc_train(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpc_train", *args], cwd=cwd, env=without_slurm(),
                          capture_output=True, text=True, timeout=60)


def test_render_embeds_the_task_file_by_its_absolute_path(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text("def build_model(): pass\ndef train_dataset(input_context, batch_size): pass\n")
    result = hpc_train("render", "--nodes", "2", "--task", "mine.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    embedded = result.stdout.split("<<'HPC_TRAIN_CONFIG'\n")[1].split("HPC_TRAIN_CONFIG")[0]
    assert yaml.safe_load(embedded)["task"] == str(tmp_path / "mine.py")


def test_a_task_file_that_is_not_there_is_refused_before_submitting(tmp_path: Path) -> None:
    for command in ("render", "submit"):
        result = hpc_train(command, "--nodes", "2", "--task", "typo.py", cwd=tmp_path)
        assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
        assert f"task {tmp_path / 'typo.py'}: no such file" in result.stderr
