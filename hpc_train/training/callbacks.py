"""Epoch-level callbacks: progress lines and metrics.json (chief only), and checkpoints.

Epoch hooks only: ParameterServerStrategy refuses batch-level callbacks.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpc_train.training.keras import keras, tf

REPORTED = ("loss", "accuracy", "val_loss", "val_accuracy")


def write_json_atomically(path: Path, value: Any) -> None:
    """Write, then rename: a reader never sees half a file, a crash never loses the old one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(value, indent=2) + "\n")
    os.replace(partial, path)


class EpochReport(keras.callbacks.Callback):
    """One line per epoch on the chief, and metrics.json rewritten after each epoch.

    Epochs recorded by an earlier run that this one resumes are kept.
    """

    def __init__(self, metrics_path: Path | None, images_per_epoch: int, total_epochs: int,
                 summary: dict[str, Any], print_line: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.metrics_path = metrics_path
        self.images_per_epoch = images_per_epoch
        self.total_epochs = total_epochs
        self.summary = summary
        self.print_line = print_line or (lambda line: print(line, flush=True))
        self.epochs: list[dict[str, Any]] = []
        self._started = 0.0
        self._trained: float | None = None

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self.epochs = self._earlier_epochs()

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.epochs = [record for record in self.epochs if record["epoch"] <= epoch]
        self._started = time.perf_counter()
        self._trained = None

    def on_test_begin(self, logs: dict[str, Any] | None = None) -> None:
        # fit() validates after the epoch's training steps: images/s counts training alone.
        if self._trained is None:
            self._trained = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        now = time.perf_counter()
        training_seconds = (self._trained or now) - self._started
        values = {name: float(logs[name]) for name in REPORTED if logs and name in logs}
        record = {"epoch": epoch + 1, **values, "seconds": round(now - self._started, 3),
                  "training_seconds": round(training_seconds, 3),
                  "images_per_second": round(self.images_per_epoch / training_seconds, 1)}
        self.epochs.append(record)
        shown = "  ".join(f"{name} {values[name]:.4f}" for name in REPORTED if name in values)
        self.print_line(f"epoch {epoch + 1}/{self.total_epochs}  {shown}  {record['seconds']:.1f} s  "
                        f"{record['images_per_second']:.0f} images/s")
        self.write()

    def write(self, totals: dict[str, Any] | None = None) -> None:
        if self.metrics_path is None:
            return
        seconds = sum(record["seconds"] for record in self.epochs)
        training_seconds = sum(record["training_seconds"] for record in self.epochs)
        images = self.images_per_epoch * len(self.epochs)
        summary_totals = {"epochs": len(self.epochs), "seconds": round(seconds, 3), "images": images,
                          "images_per_second": round(images / training_seconds, 1) if training_seconds else None,
                          **(totals or {})}
        write_json_atomically(self.metrics_path, {**self.summary, "epochs": self.epochs, "totals": summary_totals})

    def _earlier_epochs(self) -> list[dict[str, Any]]:
        if self.metrics_path is None or not self.metrics_path.is_file():
            return []
        try:
            return list(json.loads(self.metrics_path.read_text()).get("epochs", []))
        except (ValueError, AttributeError):
            print(f"hpc-train: warning: {self.metrics_path} is unreadable; starting its epoch list afresh",
                  file=sys.stderr)
            return []


class EpochCheckpoint(keras.callbacks.Callback):
    """Save model and optimizer after every epoch, numbered by the epochs done."""

    def __init__(self, manager: tf.train.CheckpointManager) -> None:
        super().__init__()
        self.manager = manager

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.manager.save(checkpoint_number=epoch + 1)
