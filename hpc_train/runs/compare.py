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
    """Every element's objective by epoch, and the objective against each swept key; False without matplotlib.

    The legend names each curve by its values; a key swept over a range of powers of ten gets a log axis; points
    and curves that tie (the same values, or the same result) stay visible: markers grow with the runs they hold
    and say how many, and each curve has its own line style.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure = draw(plt, elements, keys, objective)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def draw(plt: Any, elements: Sequence[Element], keys: Sequence[str], objective: str) -> Any:
    """The figure `plot` saves (pyplot given): the curves, then a panel per swept key."""
    figure, axes = plt.subplots(1, 1 + len(keys), figsize=(5 * (1 + len(keys)), 4), squeeze=False)
    _plot_curves(axes[0][0], elements, keys, objective)
    for axis, key in zip(axes[0][1:], keys):
        _plot_against(axis, elements, key, objective)
    figure.tight_layout()
    return figure


LINE_STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def curve_label(element: Element, keys: Sequence[str]) -> str:
    """What a curve stands for: its values (key=value, ...), or its index when nothing was swept."""
    return ", ".join(f"{key}={value_text(element.values.get(key))}" for key in keys) or f"element {element.index}"


def _plot_curves(axis: Any, elements: Sequence[Element], keys: Sequence[str], objective: str) -> None:
    for number, element in enumerate(elements):
        points = [(epoch["epoch"], epoch[objective]) for epoch in element.epochs
                  if isinstance(epoch.get(objective), (int, float)) and "epoch" in epoch]
        if points:
            # A style of its own and a see-through line: two elements that learn alike stay two curves.
            axis.plot(*zip(*points), linestyle=LINE_STYLES[number % len(LINE_STYLES)],
                      marker=MARKERS[number % len(MARKERS)], alpha=0.75, label=curve_label(element, keys))
    axis.set(xlabel="epoch", ylabel=objective, title=f"{objective} by epoch, each element")
    axis.xaxis.get_major_locator().set_params(integer=True)  # epochs are whole
    if len(elements) <= 12:
        axis.legend(fontsize="small")


def log_axis(values: Sequence[float]) -> bool:
    """Whether values span powers of ten (learning rates, weight decays): all positive, 10 or more apart."""
    return bool(values) and min(values) > 0 and max(values) / min(values) >= 10


def tied_points(pairs: Sequence[tuple[Any, float]]) -> list[tuple[Any, float, int]]:
    """(x, y, how many runs landed there), in first-seen order: ties drawn once, bigger, with their count."""
    counts: dict[tuple[Any, float], int] = {}
    for pair in pairs:
        counts[pair] = counts.get(pair, 0) + 1
    return [(x, y, count) for (x, y), count in counts.items()]


def _plot_against(axis: Any, elements: Sequence[Element], key: str, objective: str) -> None:
    pairs = [(element.values.get(key), value) for element in elements
             if (value := element.last(objective)) is not None and element.values.get(key) is not None]
    numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x, _ in pairs)
    categories = [] if numeric else sorted({value_text(x) for x, _ in pairs})
    points = tied_points([(x if numeric else categories.index(value_text(x)), y) for x, y in pairs])
    if points:
        xs, ys, counts = zip(*points)
        axis.scatter(xs, ys, s=[40 * count for count in counts], alpha=0.6, edgecolors="black")
        for x, y, count in points:
            if count > 1:
                axis.annotate(f"x{count}", (x, y), textcoords="offset points", xytext=(6, 6), fontsize="small")
        if numeric and log_axis([float(x) for x in xs]):
            axis.set_xscale("log")
        if not numeric:
            axis.set_xticks(range(len(categories)), categories)
    axis.margins(0.15)  # room for the counts beside points at the edges
    axis.set(xlabel=key, ylabel=objective, title=f"{objective} against {key}")
