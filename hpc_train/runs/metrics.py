"""`metrics.json`, a run folder's figures: the one module that writes and reads it.

The chief rewrites it after every epoch (training/callbacks.py): the run's summary fields (the task's, the
batch, the layout), `epochs` (one entry per epoch trained: loss, the task's metrics, validation's,
images_per_second, seconds ...) and `totals` (seconds, failures, the final figures). Everything else, the
trainer resuming its epoch list, pruning, status, report, the demo and the benchmarks, asks this module.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpc_train.runs.state import write_json_atomically

METRICS_FILE = "metrics.json"


class UnreadableMetrics(ValueError):
    """A metrics.json that is there but cannot be read as a JSON object."""


def metrics_path(run_dir: Path) -> Path:
    return Path(run_dir) / METRICS_FILE


def write_metrics(run_dir: Path, metrics: Mapping[str, Any]) -> None:
    """The whole file, written then renamed: a reader never sees half of it."""
    write_json_atomically(metrics_path(run_dir), dict(metrics))


def read_metrics(run_dir: Path, strict: bool = False) -> dict[str, Any]:
    """The run's figures; {} when there are none yet. An unreadable file is {} too, or UnreadableMetrics when
    `strict` (the trainer says so before it starts its epoch list afresh)."""
    path = metrics_path(run_dir)
    try:
        value = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        if strict:
            raise UnreadableMetrics(f"{path}: {error}") from None
        return {}
    if not isinstance(value, dict):
        if strict:
            raise UnreadableMetrics(f"{path}: not a JSON object")
        return {}
    return value


def epochs(run_dir: Path) -> list[dict[str, Any]]:
    """The epochs trained so far, oldest first ([] before the first one ends)."""
    return epochs_in(read_metrics(run_dir))


def epochs_in(metrics: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The epochs of figures already read (`read_metrics`'s), oldest first."""
    found = metrics.get("epochs", [])
    return [epoch for epoch in found if isinstance(epoch, dict)] if isinstance(found, list) else []


def totals(run_dir: Path) -> dict[str, Any]:
    """The run's totals (seconds, failures, final figures); {} until the first epoch ends."""
    found = read_metrics(run_dir).get("totals", {})
    return found if isinstance(found, dict) else {}
