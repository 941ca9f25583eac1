"""A user's task module under the trainer, as real processes: trained, stopped, resumed, and its errors told.

(On a real Slurm, on 2 nodes and under parameter_server: tests/e2e/test_task_modules.py. Its checkpoint restored at
another size: tests/training/test_trainer_faults.py, where a stop request to one worker stops both.)
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.fake_slurm import without_slurm
from tests.training.runs import Watched, digest, finish, metrics, start, state
from tests.training.tasks import REGRESSION

pytestmark = pytest.mark.tensorflow
TASK = str(REGRESSION)
# 128 steps per epoch, a step boundary every 4.
SETTINGS = (f"task={TASK}", "epochs=2", "batch_size=16", "steps_per_execution=4")


def counting_task(tmp_path: Path) -> tuple[Path, Path]:
    """The regression task, its datasets' builds written down, its final figures numpy's: (the task, the calls)."""
    calls = tmp_path / "calls"
    counting = tmp_path / "counting_task.py"
    counting.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(TASK).parent)!r})
        import regression

        build_model = regression.build_model

        def train_dataset(input_context, batch_size):
            with open({str(calls)!r}, "a") as out:
                out.write("train\\n")
            return regression.train_dataset(input_context, batch_size)

        def validation_dataset(input_context, batch_size):
            with open({str(calls)!r}, "a") as out:
                out.write("validation\\n")
            return regression.validation_dataset(input_context, batch_size)

        def final_metrics(model):
            import numpy as np

            return {{"final_mse": np.float32(0.25), "final_count": 3}}
    """))
    return counting, calls


def test_a_user_task_stops_mid_epoch_and_resumes_to_the_uninterrupted_weights_and_start_up_builds_each_dataset_once(
        tmp_path: Path) -> None:
    """One uninterrupted run for both (a TensorFlow start less): the regression task wrapped to count its datasets'
    builds and give numpy final figures (the same model, data and seed: the same weights), then the task itself
    stopped mid-epoch and resumed to those weights."""
    counting, calls = counting_task(tmp_path)
    [(code, _, err)] = finish([start(tmp_path / "whole", *SETTINGS, f"task={counting}")])
    assert code == 0, err[-3000:]
    uninterrupted = digest(err)
    # Start-up: train: one build counted and checked, one stream for the run's one stretch (there were three);
    # validation: one counted, one for fit, whatever the epochs.
    assert sorted(calls.read_text().split()) == ["train", "train", "validation", "validation"]
    # Final figures of numpy are recorded as numbers.
    assert state(tmp_path / "whole")["final_mse"] == 0.25
    assert state(tmp_path / "whole")["final_count"] == 3
    whole = metrics(tmp_path / "whole")

    run = Watched(start(tmp_path / "run", *SETTINGS))
    run.wait_for("; output in")  # training is about to start
    run.process.send_signal(signal.SIGUSR1)
    code, _, err = run.finish()
    assert code == 75, err[-3000:]
    stopped = state(tmp_path / "run")
    assert stopped["state"] == "stopped" and 0 < stopped["global_step"] < 256 and stopped["global_step"] % 4 == 0

    [(code, out, err)] = finish([start(tmp_path / "run", *SETTINGS)])
    assert code == 0, err[-3000:]
    assert re.search(rf"resuming (in|after) epoch \d.* \(step {stopped['global_step']}\)", out), out
    assert digest(err) == uninterrupted  # the same batches in the same order after the stop: the same model
    # Without final_metrics(), the task's final figures are its last validation's.
    assert re.search(r"^hpc-train: done: final_val_loss \d\.\d{4}, final_val_mae \d\.\d{4}; model ", out, re.M), out
    resumed = metrics(tmp_path / "run")
    assert [epoch["epoch"] for epoch in resumed["epochs"]] == [1, 2] and resumed["task"] == TASK
    assert "data_dir" not in resumed["config"] and resumed["config"]["epochs"] == 2  # MNIST's settings are not its
    assert resumed["totals"]["final_val_loss"] < 0.5 * whole["epochs"][0]["loss"]  # it learned


def train(tmp_path: Path, task_text: str) -> subprocess.CompletedProcess[str]:
    task = tmp_path / "broken_task.py"
    task.write_text(Path(TASK).read_text() + textwrap.dedent(task_text))
    return subprocess.run([sys.executable, "-m", "hpc_train.train", "--set", f"task={task}", "--output-dir",
                           str(tmp_path / "out"), "--set", "epochs=1"], env=without_slurm(), capture_output=True,
                          text=True, timeout=120)


def test_a_raising_build_model_shows_the_users_message_and_frames_only(tmp_path: Path) -> None:
    result = train(tmp_path, """
        def _layers():
            raise ValueError("units must be positive, got -3")

        def build_model():
            return _layers()
        """)
    assert result.returncode == 1, result.stderr[-3000:]
    traceback = result.stderr[result.stderr.index("Traceback (most recent call last, the task's own code only)"):]
    assert re.search(r'broken_task\.py", line \d+, in build_model\n.*broken_task\.py", line \d+, in _layers',
                     traceback, re.S), traceback
    assert "site-packages" not in traceback and "hpc_train/" not in traceback
    assert traceback.rstrip().splitlines()[-1] == (
        f"hpc-train train: error: task {tmp_path / 'broken_task.py'}: build_model() raised ValueError: "
        "units must be positive, got -3")


def test_batches_of_the_wrong_size_are_refused_in_one_line(tmp_path: Path) -> None:
    result = train(tmp_path, """
        _train = train_dataset

        def train_dataset(input_context, batch_size):
            return _train(input_context, 10).unbatch().batch(batch_size + 1, drop_remainder=True)
        """)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.rstrip().splitlines()[-1] == (
        f"hpc-train train: error: task {tmp_path / 'broken_task.py'}: train_dataset(input_context, batch_size) "
        "yields batches of 65, but batch_size is 64 per replica; batch with the batch_size argument hpc-train passes")


def test_final_figures_other_than_numbers_are_refused(tmp_path: Path) -> None:
    """(Numpy's are recorded as numbers: test_a_user_task_stops_mid_epoch_..._and_start_up_builds_each_dataset_once.)"""
    (tmp_path / "words").mkdir()
    refused = train(tmp_path / "words", """
        def final_metrics(model):
            return {"final_mse": "low"}
        """)
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert refused.stderr.rstrip().splitlines()[-1] == (
        f"hpc-train train: error: task {tmp_path / 'words' / 'broken_task.py'}: final_metrics(model) returned "
        "'final_mse': a "
        "str, not a number; return a dict of name -> number")


def test_a_summary_metrics_json_cannot_hold_is_refused_before_training(tmp_path: Path) -> None:
    result = train(tmp_path, """
        def summary():
            return {"shape": object()}
        """)
    assert result.returncode == 2, result.stderr[-3000:]
    last = result.stderr.rstrip().splitlines()[-1]
    assert last.startswith(f"hpc-train train: error: task {tmp_path / 'broken_task.py'}: summary() returned what "
                           "metrics.json cannot hold (Object of type object is not JSON serializable)")
    assert "epoch 1/1" not in result.stdout


def test_a_task_writes_to_its_own_folder_and_another_models_checkpoint_is_one_line(tmp_path: Path) -> None:
    """(issue 27, 3) A task module wrote to runs/mnist; a model that met another's checkpoint died in a traceback."""
    other = tmp_path / "wider.py"
    other.write_text(Path(TASK).read_text().replace("Dense(32", "Dense(16"))

    def train(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hpc_train", "train", "--set", "epochs=1", "--set",
                               "steps_per_epoch=2", "--set", "batch_size=16", *args], cwd=tmp_path,
                              env=without_slurm(), capture_output=True, text=True, timeout=300)

    first = train("--task", TASK)
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "runs" / "regression" / "metrics.json").is_file()  # named after the task, not runs/mnist
    # A plain train outside Slurm shows no start-up noise either (issue 27, 9): the run's own lines only.
    assert "cuInit" not in first.stderr and "cpu_feature_guard" not in first.stderr, first.stderr
    assert not [line for line in first.stderr.splitlines() if line.startswith(("I0000", "W0000", "E0000"))]
    mismatched = train("--task", str(other), "--output-dir", "runs/regression")
    assert mismatched.returncode == 2 and "Traceback" not in mismatched.stderr, mismatched.stderr
    [said] = [line for line in mismatched.stderr.splitlines() if line.startswith("hpc-train train:")]
    assert said.startswith("hpc-train train: error: checkpoint runs/regression/checkpoints/ckpt-2 does not fit this "
                           "model (Received incompatible tensor"), said
    assert said.endswith("runs/regression holds another model's run; give this one another --output-dir, or "
                         "delete runs/regression to start afresh")
    assert "could not be found in the restored object" not in mismatched.stderr
