"""The trainer for real, on CPU and real MNIST: one process, two workers, a parameter-server job, a resume.

Each run is a real process (several for the distributed ones, talking over
localhost) started as `python -m hpc_train.train`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.net import free_port_block
from tests.training.reference import SMALL, FinishedRun, small_run  # noqa: F401 - the fixture
from tests.training.runs import EPOCH_LINE, digest, finish, metrics, start

pytestmark = pytest.mark.tensorflow


def test_one_process_reaches_97_percent_and_as_a_sweeps_element_writes_its_values_for_tensorboards_hparams_view(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An element of a sweep over learning_rate that drew the default: the very run a plain one is, plus its values
    # for TensorBoard (one run for both: a TensorFlow start less).
    monkeypatch.setenv("HPC_TRAIN_SWEEP_LEARNING_RATE", "0.001")
    monkeypatch.setenv("HPC_TRAIN_TRIAL", "1")
    [(code, out, err)] = finish([start(tmp_path, "epochs=8", "learning_rate=0.001")])
    assert code == 0, err[-3000:]
    assert [int(m.group(1)) for m in EPOCH_LINE.finditer(out)] == list(range(1, 9))
    assert "batch 64 per replica, 64 global" in out
    result = metrics(tmp_path)
    assert result["totals"]["final_val_accuracy"] >= 0.97
    assert (result["strategy"], result["world_size"], result["replicas"], result["global_batch"]) == ("none", 1, 1, 64)
    assert [epoch["epoch"] for epoch in result["epochs"]] == list(range(1, 9))
    assert {"loss", "accuracy", "val_accuracy", "seconds", "images_per_second"} <= set(result["epochs"][-1])
    assert result["tensorflow"].startswith("2.")
    assert 0.5 < result["first_steps_after_seconds"] < 120  # process start, TensorFlow's import included
    assert "training: first steps done" in out
    assert (tmp_path / "model.keras").is_file() and (tmp_path / "checkpoints" / "ckpt-1000.index").is_file()
    assert any((tmp_path / "tensorboard" / "train").iterdir())
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"tensors": 0})
    events.Reload()
    plugin = events.PluginTagToContent("hparams")
    [content] = plugin.values()
    assert b"learning_rate" in content and os.path.isdir(tmp_path / "tensorboard" / "validation")


@pytest.mark.mock_twin("tests/e2e/test_trainer_jobs.py::test_mnist_2node_forms_one_cluster_and_learns")
def test_two_workers_agree_and_only_the_chief_writes(tmp_path: Path) -> None:
    base = free_port_block(2)
    cluster = {"worker": [f"localhost:{base}", f"localhost:{base + 1}"]}
    results = finish([start(tmp_path, "strategy=multiworker", "epochs=8", "learning_rate=0.002",
                            tf_config={"cluster": cluster, "task": {"type": "worker", "index": index}})
                      for index in range(2)])
    for code, _, err in results:
        assert code == 0, err[-3000:]
    (_, chief_out, chief_err), (_, other_out, other_err) = results
    assert digest(chief_err) == digest(other_err)  # identical weights on both workers
    assert len(EPOCH_LINE.findall(chief_out)) == 8 and EPOCH_LINE.findall(other_out) == []
    assert "batch 64 per replica, 128 global" in chief_out
    result = metrics(tmp_path)
    assert (result["world_size"], result["workers"], result["replicas"]) == (2, 2, 2)
    assert result["totals"]["final_val_accuracy"] >= 0.97
    assert sorted(path.name for path in tmp_path.iterdir()) == ["checkpoints", "metrics.json", "model.keras",
                                                                 "state.json", "tensorboard"]  # no scratch left


def test_a_parameter_server_job_with_each_task_bound_to_one_core_trains_and_every_task_exits(tmp_path: Path) -> None:
    # Bound as srun --cpu-bind binds them: with one CPU TensorFlow once gave each task one inter-op thread, and
    # the workers' first steps never ended.
    base = free_port_block(4)
    cluster = {"chief": [f"localhost:{base}"], "ps": [f"localhost:{base + 1}"],
               "worker": [f"localhost:{base + 2}", f"localhost:{base + 3}"]}
    tasks = [("chief", 0), ("ps", 0), ("worker", 0), ("worker", 1)]
    cores = os.cpu_count() or 1
    # (A hang shows at the first steps: two short epochs, not a long run, prove it is gone.)
    results = finish([start(tmp_path, "strategy=parameter_server", "epochs=2", "train_images=2000", core=rank % cores,
                            tf_config={"cluster": cluster, "task": {"type": kind, "index": index}})
                      for rank, (kind, index) in enumerate(tasks)])
    for (kind, index), (code, _, err) in zip(tasks, results):
        assert code == 0, f"{kind} {index}: {err[-3000:]}"
    for (kind, index), (_, _, err) in zip(tasks[1:], results[1:]):
        assert f"[{kind} {index}] the chief at localhost:{base} has finished; exiting" in err
    result = metrics(tmp_path)
    assert (result["strategy"], result["world_size"], result["workers"]) == ("parameter_server", 4, 2)
    assert result["totals"]["final_val_accuracy"] >= 0.8  # it learned (the 97% run is the one-process test's)


def test_a_second_run_resumes_after_the_last_finished_epoch(tmp_path: Path, small_run: FinishedRun) -> None:
    """(A run whose epochs are all done says so and trains none: tests/training/test_fit.py's second call.)"""
    run = small_run.copy(tmp_path / "run")  # a first run of 2 epochs (the session's), here to be run again
    first = metrics(run)["epochs"]
    [(code, out, err)] = finish([start(run, *SMALL, "epochs=3")])
    assert code == 0, err[-3000:]
    assert f"resuming after epoch 2 (step 62) from {run / 'checkpoints' / 'ckpt-62'}" in out
    assert [int(m.group(1)) for m in EPOCH_LINE.finditer(out)] == [3]
    result = metrics(run)
    assert [epoch["epoch"] for epoch in result["epochs"]] == [1, 2, 3]
    assert result["epochs"][:2] == first  # the first run's records are kept


def test_mirrored_and_the_deep_model_train(tmp_path: Path) -> None:
    [(code, out, err)] = finish([start(tmp_path, "strategy=mirrored", "model=deep", "epochs=2",
                                       "train_images=2000")])
    assert code == 0, err[-3000:]
    assert "mirrored: 1 process" in out
    result = metrics(tmp_path)
    assert result["config"]["model"] == "deep" and result["totals"]["final_val_accuracy"] >= 0.9


@pytest.mark.mock_twin("tests/e2e/test_trainer_jobs.py::test_a_warned_job_requeues_itself_then_a_slurm_requeue_skips_its_damaged_newest_checkpoint")
def test_a_damaged_newest_checkpoint_falls_back_to_the_one_before(tmp_path: Path, small_run: FinishedRun) -> None:
    run = small_run.copy(tmp_path / "run")  # 2 epochs run through: checkpoints after each (steps 31 and 62)
    data = next((run / "checkpoints").glob("ckpt-62.data-*"))
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])  # a half-written copy
    [(code, out, err)] = finish([start(run, *SMALL, "epochs=3")])
    assert code == 0, err[-3000:]
    assert f"warning: checkpoint {run / 'checkpoints' / 'ckpt-62'} is damaged" in err
    assert f"resuming after epoch 1 (step 31) from {run / 'checkpoints' / 'ckpt-31'}" in out
    assert [int(m.group(1)) for m in EPOCH_LINE.finditer(out)] == [2, 3]  # no epoch skipped
    assert [epoch["epoch"] for epoch in metrics(run)["epochs"]] == [1, 2, 3]
