"""hpc_train.fit: the trainer called from Python with a task's functions, checked as a module's are."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import hpc_train
from hpc_train.errors import HpcTrainError
from tests.fake_slurm import without_slurm
SCRIPT = textwrap.dedent("""
    import sys
    import hpc_train
    from tests.training.tasks import regression

    sys.exit(hpc_train.fit(regression.build_model, regression.train_dataset, regression.validation_dataset,
                           epochs=2, batch_size=32, output_dir=sys.argv[1]))
""")


@pytest.mark.tensorflow
def test_fit_trains_the_functions_it_is_given_and_a_second_call_resumes(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    first = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "out")], cwd=root, env=without_slurm(),
                           capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert [epoch["epoch"] for epoch in metrics["epochs"]] == [1, 2]
    assert metrics["steps_per_epoch"] == 2048 // 32  # regression.EXAMPLES, in batches of 32
    assert metrics["totals"]["final_val_loss"] < metrics["epochs"][0]["loss"]
    again = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "out")], cwd=root, env=without_slurm(),
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "all 2 epochs are done already" in again.stdout, again.stderr[-3000:]


@pytest.mark.parametrize("settings, words", [({"epochz": 2}, "epochz"),
                                             ({"task": "mine.py"}, "task= is not a setting here")])
def test_a_wrong_setting_is_refused_before_anything_runs(settings: dict, words: str) -> None:
    with pytest.raises(HpcTrainError, match=words):
        hpc_train.fit(lambda: None, lambda input_context, batch_size: None, **settings)
