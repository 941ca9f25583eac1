"""Comparing the runs of a sweep (or one run): a table sorted by the objective, the best named, a CSV and a plot.

Each element's figures come from its run folder's metrics.json (the trainer
writes it after every epoch): its last epoch's validation figures, and every
epoch's for the curves. The objective's direction follows its name: a loss
(or error) is minimised, anything else maximised.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpc_train.errors import HpcTrainError


@dataclass(frozen=True)
class Element:
    index: int
    values: Mapping[str, Any]
    state: str
    epochs: Sequence[Mapping[str, Any]] = field(default_factory=tuple)  # metrics.json's, oldest first

    def last(self, name: str) -> float | None:
        figures = [epoch[name] for epoch in self.epochs if isinstance(epoch.get(name), (int, float))]
        return float(figures[-1]) if figures else None


def read_epochs(folder: Path) -> list[dict[str, Any]]:
    try:
        epochs = json.loads((folder / "metrics.json").read_text()).get("epochs", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [epoch for epoch in epochs if isinstance(epoch, dict)] if isinstance(epochs, list) else []


def minimised(objective: str) -> bool:
    return "loss" in objective or "error" in objective


def default_objective(elements: Sequence[Element]) -> str:
    """val_accuracy where the runs have it, else val_loss (the built-in task's, and most tasks')."""
    names = {name for element in elements for epoch in element.epochs for name in epoch}
    return "val_accuracy" if "val_accuracy" in names else "val_loss"


def ranked(elements: Sequence[Element], objective: str) -> list[Element]:
    """Best first by the objective; elements without it last, by index."""
    sign = 1 if minimised(objective) else -1

    def key(element: Element) -> tuple[int, float, int]:
        value = element.last(objective)
        return (value is None, sign * value if value is not None else math.inf, element.index)

    return sorted(elements, key=key)


def report_lines(elements: Sequence[Element], keys: Sequence[str], objective: str) -> list[str]:
    """The table, best first, and the best values named."""
    if not any(element.last(objective) is not None for element in elements):
        raise HpcTrainError(f"no run has {objective} yet (metrics.json after each epoch); wait for an epoch, or "
                            "name another --objective (val_loss, val_accuracy, ...)")
    rows = [["RANK", "INDEX", *keys, objective, "EPOCHS", "STATE"]]
    order = ranked(elements, objective)
    for rank, element in enumerate(order, 1):
        value = element.last(objective)
        rows.append([str(rank), str(element.index), *(_text(element.values.get(key)) for key in keys),
                     f"{value:.4f}" if value is not None else "-", str(len(element.epochs)), element.state.lower()])
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    best = order[0]
    direction = "lowest" if minimised(objective) else "highest"
    shown = ", ".join(f"{key}={_text(best.values.get(key))}" for key in keys)
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows] + [
        f"best ({direction} {objective}): element {best.index}: {shown}: {objective} {best.last(objective):.4f}"]


def csv_text(elements: Sequence[Element], keys: Sequence[str], objective: str) -> str:
    """sweep.csv: a row per element, best first: index, values, state, epochs, then every last figure."""
    names = sorted({name for element in elements for epoch in element.epochs for name in epoch
                    if isinstance(epoch.get(name), (int, float)) and name != "epoch"})
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["index", *keys, "state", "epochs", *names])
    for element in ranked(elements, objective):
        writer.writerow([element.index, *(element.values.get(key) for key in keys), element.state.lower(),
                         len(element.epochs), *(element.last(name) for name in names)])
    return out.getvalue()


def plot(elements: Sequence[Element], keys: Sequence[str], objective: str, path: Path) -> bool:
    """Every element's objective by epoch, and the objective against each swept key; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, axes = plt.subplots(1, 1 + len(keys), figsize=(5 * (1 + len(keys)), 4), squeeze=False)
    curves = axes[0][0]
    for element in elements:
        points = [(epoch["epoch"], epoch[objective]) for epoch in element.epochs
                  if isinstance(epoch.get(objective), (int, float)) and "epoch" in epoch]
        if points:
            curves.plot(*zip(*points), marker="o", label=f"{element.index}")
    curves.set(xlabel="epoch", ylabel=objective, title=f"{objective} by epoch, each element")
    if len(elements) <= 12:
        curves.legend(title="element", fontsize="small")
    for axis, key in zip(axes[0][1:], keys):
        pairs = [(element.values.get(key), element.last(objective)) for element in elements
                 if element.last(objective) is not None and isinstance(element.values.get(key), (int, float))]
        if pairs:
            axis.scatter(*zip(*pairs))
            if all(value > 0 for value, _ in pairs) and max(v for v, _ in pairs) / min(v for v, _ in pairs) > 20:
                axis.set_xscale("log")
        axis.set(xlabel=key, ylabel=objective, title=f"{objective} against {key}")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def _text(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)
