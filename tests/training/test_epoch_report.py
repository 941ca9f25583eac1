"""The epoch report (callbacks.EpochReport): metrics.json rewritten after each epoch, an earlier run's epochs kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpc_train.runs.metrics import metrics_path, read_metrics

pytestmark = pytest.mark.tensorflow


def report_on(run_dir: Path | None, lines: list[str]):  # type: ignore[no-untyped-def]
    from hpc_train.training.callbacks import EpochReport

    report = EpochReport(run_dir, global_batch=32, total_epochs=3, summary={"task": "t"}, print_line=lines.append)
    report.set_params({"steps": 4})
    return report


def test_a_resumed_run_keeps_the_epochs_before_its_own_and_rewrites_metrics_json(tmp_path: Path) -> None:
    metrics_path(tmp_path).write_text(json.dumps({"epochs": [
        {"epoch": 1, "loss": 0.9, "seconds": 1.0, "training_seconds": 1.0, "images": 128},
        {"epoch": 2, "loss": 0.8, "seconds": 1.0, "training_seconds": 1.0, "images": 128}]}))
    lines: list[str] = []
    report = report_on(tmp_path, lines)
    report.on_train_begin()
    report.on_epoch_begin(1)  # epoch 2 again (it had begun): the earlier run's epoch 2 is replaced
    report.on_epoch_end(1, {"loss": 0.5})
    written = read_metrics(tmp_path, strict=True)
    assert [(epoch["epoch"], epoch["loss"]) for epoch in written["epochs"]] == [(1, 0.9), (2, 0.5)]
    assert written["task"] == "t" and written["totals"]["epochs"] == 2 and lines[0].startswith("epoch 2/3  loss 0.5")


def test_an_unreadable_metrics_json_is_said_and_its_epoch_list_starts_afresh(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    metrics_path(tmp_path).write_text('{"epochs": [')
    report = report_on(tmp_path, [])
    report.on_train_begin()
    assert report.epochs == []
    assert (f"hpc-train: warning: {metrics_path(tmp_path)} is unreadable; starting its epoch list afresh"
            in capsys.readouterr().err)


def test_other_ranks_write_nothing(tmp_path: Path) -> None:
    report = report_on(None, [])
    report.on_train_begin()
    report.on_epoch_begin(0)
    report.on_epoch_end(0, {"loss": 0.5})
    assert report.epochs[0]["epoch"] == 1 and list(tmp_path.iterdir()) == []
