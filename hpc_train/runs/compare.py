"""Comparing the runs of a sweep (or one run): a table sorted by the objective, the best named, a CSV and a plot.

Each element's figures come from its run folder's metrics.json (the trainer
writes it after every epoch): its last epoch's validation figures, and every
epoch's for the curves (runs/metrics.py reads it). The objective and its
direction follow the one rule of runs/objective.py.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpc_train.errors import HpcTrainError
from hpc_train.runs import objective as rule
from hpc_train.runs.columns import aligned, value_text


@dataclass(frozen=True)
class Element:
    index: int
    values: Mapping[str, Any]
    state: str
    epochs: Sequence[Mapping[str, Any]] = field(default_factory=tuple)  # metrics.json's, oldest first

    def last(self, name: str) -> float | None:
        figures = [epoch[name] for epoch in self.epochs if isinstance(epoch.get(name), (int, float))]
        return float(figures[-1]) if figures else None


def default_objective(elements: Sequence[Element]) -> str:
    """The objective where none is asked: the rule's (runs/objective.py) for the figures the runs log."""
    return rule.default_objective(name for element in elements for epoch in element.epochs for name in epoch)


def ranked(elements: Sequence[Element], objective: str) -> list[Element]:
    """Best first by the objective; elements without it last, by index."""
    sign = 1 if rule.minimised(objective) else -1

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
        rows.append([str(rank), str(element.index), *(value_text(element.values.get(key)) for key in keys),
                     f"{value:.4f}" if value is not None else "-", str(len(element.epochs)), element.state.lower()])
    best = order[0]
    shown = ", ".join(f"{key}={value_text(best.values.get(key))}" for key in keys)
    return aligned(rows) + [f"best ({rule.direction(objective)} {objective}): element {best.index}: {shown}: "
                            f"{objective} {best.last(objective):.4f}"]


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

