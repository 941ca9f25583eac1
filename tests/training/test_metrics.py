"""Metrics summed across MultiWorkerMirrored workers at epoch ends only (training/metrics.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fake_slurm import without_slurm
from tests.training.runs import finish, local_cluster, task_config

pytestmark = pytest.mark.tensorflow

ROOT = Path(__file__).resolve().parents[2]


def test_two_workers_sum_their_metrics_at_epoch_ends_and_keep_their_own_between() -> None:
    """Per step, only the gradients cross workers; the epoch's figures are still both workers' together."""
    cluster = local_cluster(worker=2)
    workers = [subprocess.Popen([sys.executable, "-m", "tests.training.metric_sync_task"], cwd=ROOT,
                                env={**without_slurm(), "TF_CONFIG": json.dumps(task_config(cluster, "worker", index))},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for index in range(2)]
    results = finish(workers)
    for code, _, err in results:
        assert code == 0, err[-3000:]
    (_, out0, _), (_, out1, _) = results
    first, second = json.loads(out0.splitlines()[-1]), json.loads(out1.splitlines()[-1])
    # Worker 0's labels are all right, worker 1's half: together 0.75, on both workers.
    for seen in (first, second):
        assert seen["epoch"]["accuracy"] == pytest.approx(0.75)
        assert seen["epoch"]["val_accuracy"] == pytest.approx(0.75)
    assert first["epoch"]["loss"] == pytest.approx(second["epoch"]["loss"])
    # Between epoch ends, each worker's callbacks see its own running values: no all-reduce made them.
    assert [logs["accuracy"] for logs in first["batches"]] == pytest.approx([1.0, 1.0])
    assert [logs["accuracy"] for logs in second["batches"]] == pytest.approx([0.5, 0.5])
    assert first["batches"][-1]["loss"] < first["epoch"]["loss"] < second["batches"][-1]["loss"]
