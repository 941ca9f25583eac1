"""The examples in examples/, each run as a user would: a plain script, a task module, sharded TFRecord files.

(On a real Slurm: tests/e2e/test_commands.py submits the plain script, warns, requeues and resumes it.)
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType

import pytest

from tests.fake_slurm import without_slurm

pytestmark = pytest.mark.tensorflow
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SEED_SCRIPT = EXAMPLES / "seed_multiworker.py"


def hpc_train(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpc_train", *args], cwd=cwd, env={**without_slurm(), **(env or {})},
                          capture_output=True, text=True, timeout=300)


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def digests(text: str, pattern: str) -> dict[str, str]:
    """Rank -> weights digest, from the rank-prefixed lines of a 2-task run."""
    return dict(re.findall(rf"^(\d): {pattern}([0-9a-f]{{16}})$", text, re.M))


def seed_script_of_rank(rank: int, cwd: Path) -> int:
    """The pid of the example script that runs as `rank` in `cwd` (this test's own processes only)."""
    for proc in Path("/proc").iterdir():
        try:
            # The script's python, not the bootstrap that runs it (whose arguments name it too).
            arguments = (proc / "cmdline").read_bytes().split(b"\0") if proc.name.isdigit() else []
            if (arguments[1:2] == [str(SEED_SCRIPT).encode()]
                    and Path(os.readlink(proc / "cwd")) == cwd
                    and f"SLURM_PROCID={rank}".encode() in (proc / "environ").read_bytes().split(b"\0")):
                return int(proc.name)
        except OSError:  # gone meanwhile, or not ours
            continue
    raise AssertionError(f"no seed_multiworker.py of rank {rank} running in {cwd}")


def test_the_plain_script_on_two_tasks_stops_together_when_one_is_stopped_and_resumes_exactly(tmp_path: Path) -> None:
    assert "hpc_train" not in SEED_SCRIPT.read_text()
    command = [sys.executable, "-m", "hpc_train", "submit", "--nodes", "2", "--local", "--", sys.executable,
               str(SEED_SCRIPT), "--epochs", "6", "--batch-size", "128"]  # 16 steps an epoch
    errors = tmp_path / "first.err"
    with errors.open("w") as stderr:
        first = subprocess.Popen(command, cwd=tmp_path, env=without_slurm(), stdout=subprocess.PIPE, stderr=stderr,
                                 text=True)
    watchdog = threading.Timer(180, first.kill)  # a hung run fails the test instead of hanging it
    watchdog.start()
    try:
        lines = []
        for line in first.stdout:  # type: ignore[union-attr]
            lines.append(line)
            if line.startswith("1: epoch 1/6"):
                # Rank 1 alone is stopped (TensorFlow's own SIGTERM handler must not swallow it): both must
                # still stop after the same epoch, or rank 0 would hang in the next step's all-reduce.
                [snapshot] = (tmp_path / "runs" / "snapshots").iterdir()  # where the ranks run: the code submitted
                os.kill(seed_script_of_rank(1, snapshot / "files"), signal.SIGTERM)
        out = "".join(lines)
        assert first.wait() == 75, out + errors.read_text()[-3000:]
    finally:
        watchdog.cancel()
        first.kill()
    stops = re.findall(r"^(\d): stopped by SIGTERM: saved after epoch (\d); exiting 75", out, re.M)
    assert sorted(rank for rank, _ in stops) == ["0", "1"] and stops[0][1] == stops[1][1], out
    stopped = int(stops[0][1])
    assert stopped < 6 and "done: final loss" not in out
    [run] = (tmp_path / "runs").glob("*-local-*")  # HPC_TRAIN_RUN_DIR: the chief saved into the job's folder
    assert (run / "checkpoints" / f"ckpt-{stopped}.index").is_file()

    # Run again on that folder (a requeued Slurm job keeps its folder; a new local run makes a new one).
    second = hpc_train(*command[3:], "--output", str(run), cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert re.findall(r"^\d: resuming after epoch (\d)$", second.stdout, re.M) == [str(stopped)] * 2, second.stdout
    assert f"epoch {stopped}/6" not in second.stdout and "epoch 6/6" in second.stdout
    finals = digests(second.stdout, r"done: final loss \d\.\d+; weights digest ")
    assert set(finals) == {"0", "1"} and finals["0"] == finals["1"], second.stdout  # one model on both workers
    assert (run / "checkpoints" / "ckpt-6.index").is_file()

    # Exact resume: the same weights, bit for bit, as a run never stopped.
    whole = hpc_train(*command[3:], "--output", str(tmp_path / "whole"), cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert digests(whole.stdout, r"done: final loss \d\.\d+; weights digest ") == finals


def test_the_plain_script_alone_saves_and_exits_75_when_warned(tmp_path: Path) -> None:
    # No TF_CONFIG: one process, its own chief. SIGUSR1 is Slurm's time-limit warning, as hpc-train passes it on
    # (on the real Slurm, tests/e2e warns both tasks of a job and has it requeued).
    script = subprocess.Popen([sys.executable, str(SEED_SCRIPT), "--epochs", "6", "--batch-size", "256",
                               "--output", str(tmp_path / "run")], cwd=tmp_path, env=without_slurm(),
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    watchdog = threading.Timer(120, script.kill)
    watchdog.start()
    try:
        lines = []
        for line in script.stdout:  # type: ignore[union-attr]
            lines.append(line)
            if line.startswith("epoch 1/6"):
                script.send_signal(signal.SIGUSR1)
        out = "".join(lines)
        assert script.wait() == 75, out
    finally:
        watchdog.cancel()
        script.kill()
    stopped = re.search(r"^warned: saved after epoch (\d); exiting 75", out, re.M)
    assert stopped is not None and int(stopped.group(1)) < 6, out
    assert (tmp_path / "run" / "checkpoints" / f"ckpt-{stopped.group(1)}.index").is_file()


def test_the_sequence_task_learns_the_four_frequencies_and_ends_with_one_model_on_two_workers(tmp_path: Path) -> None:
    # One job for both (a TensorFlow start less): the task's figures, and its model's sameness on two workers.
    result = hpc_train("launch", "--nodes", "2", "--", sys.executable, "-m", "hpc_train", "train", "--task",
                       str(EXAMPLES / "sequence_task.py"), "--set", "strategy=multiworker", "--set", "epochs=2",
                       "--output-dir", str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "4 frequencies in noisy signals of 64 samples" in result.stdout
    finished = digests(result.stderr, r"hpc-train \[worker \d\]: finished; weights digest ")
    assert set(finished) == {"0", "1"} and finished["0"] == finished["1"], result.stderr[-3000:]
    # final_metrics ran on the chief alone, after the other worker had gone: it must not be collective.
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["workers"] == 2 and metrics["totals"]["final_val_accuracy"] > 0.5
    assert [epoch["val_accuracy"] > 0.5 for epoch in metrics["epochs"]] == [True, True]  # validation ran
    assert metrics["totals"]["final_val_accuracy"] >= 0.9, metrics["epochs"]  # chance is 0.25


def records_read(dataset) -> list[tuple[float, ...]]:  # type: ignore[no-untyped-def]
    return [tuple(row) for features, _ in dataset.as_numpy_iterator() for row in features.tolist()]


def test_each_pipeline_reads_its_own_whole_files_and_all_are_read(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import tensorflow as tf

    example = load("tfrecord_task")
    monkeypatch.setenv("TFRECORD_EXAMPLE_DIR", str(tmp_path))
    monkeypatch.setenv("TFRECORD_EXAMPLE_SHARDS", "5")
    datasets = [example.train_dataset(tf.distribute.InputContext(3, pipeline, 3), 64) for pipeline in range(3)]
    assert len(list(tmp_path.glob("*.tfrecord"))) == 5 and not list(tmp_path.glob(".*"))  # no partial file left
    off = tf.data.experimental.AutoShardPolicy.OFF  # sharded by hand: TensorFlow must not shard again
    assert all(dataset.options().experimental_distribute.auto_shard_policy == off for dataset in datasets)
    read = [records_read(dataset) for dataset in datasets]
    # Files 0 and 3, 1 and 4, then 2 alone: whole files, each asserted length matching what is read.
    assert [len(records) for records in read] == [1024, 1024, 512]
    assert [int(dataset.cardinality()) for dataset in datasets] == [16, 16, 8]
    everything = [tuple(row) for shard in range(5) for row in example._records(shard)[0].tolist()]
    assert sorted(sum(read, [])) == sorted(everything)  # disjoint, and every record of every file read once


def test_fewer_files_than_workers_is_refused_naming_both_counts(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import tensorflow as tf

    example = load("tfrecord_task")
    monkeypatch.setenv("TFRECORD_EXAMPLE_DIR", str(tmp_path))
    monkeypatch.setenv("TFRECORD_EXAMPLE_SHARDS", "2")
    with pytest.raises(ValueError, match=r"^2 TFRecord files for 3 workers: some worker would read nothing; write at "
                                         r"least 3 shards .*TFRECORD_EXAMPLE_SHARDS=3"):
        example.train_dataset(tf.distribute.InputContext(3, 2, 3), 64)


def test_the_tfrecord_task_trains_from_its_shards(tmp_path: Path) -> None:
    result = hpc_train("train", "--task", str(EXAMPLES / "tfrecord_task.py"), "--output-dir", str(tmp_path / "out"),
                       "--set", "epochs=2", cwd=tmp_path, env={"TFRECORD_EXAMPLE_DIR": str(tmp_path / "data")})
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(list((tmp_path / "data").glob("*.tfrecord"))) == 8
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    # Its asserted length sets the epoch, which hpc-train cannot count in record files by itself.
    assert metrics["steps_per_epoch"] == 8 * 512 // 64 and metrics["epochs"][-1]["accuracy"] > 0.8
