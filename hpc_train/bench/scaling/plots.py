"""The scaling benchmark's plots: images/s against workers, and per strategy."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from hpc_train.bench.report import figure, pyplot
from hpc_train.bench.scaling.analysis import efficiencies, rates
from hpc_train.bench.scaling.runs import INDEPENDENT, Result, Run


def plot_scaling(results: dict[Run, list[Result]], batches: Sequence[int]) -> None:
    plt = pyplot()
    if plt is None:
        return
    drawing, axes = plt.subplots(figsize=(7.5, 4))
    width = 0.26
    bars = (("1 worker", Run("multiworker", 1, 0), "grey", ""), ("2 workers, multiworker", Run("multiworker", 2, 0),
            "tab:blue", ""), ("2 independent workers (ceiling)", Run(INDEPENDENT, 2, 0), "white", "//"))
    for offset, (label, kind, color, hatch) in enumerate(bars):
        medians = [statistics.median(rates(results, Run(kind.strategy, kind.workers, batch))) for batch in batches]
        axes.bar([index + (offset - 1) * width for index in range(len(batches))], medians, width, label=label,
                 color=color, hatch=hatch, edgecolor="tab:blue" if hatch else color)
    ideal = [2 * statistics.median(rates(results, Run("multiworker", 1, batch))) for batch in batches]
    axes.scatter(range(len(batches)), ideal, marker="_", s=600, color="red", label="ideal: 2x one worker",
                 zorder=3)
    for index, batch in enumerate(batches):
        axes.annotate(f"{statistics.median(efficiencies(results, batch)):.0%}", (index, ideal[index]),
                      textcoords="offset points", xytext=(0, 4), ha="center")
    axes.set_xticks(range(len(batches)), [str(batch) for batch in batches])
    axes.set(xlabel="batch per worker", ylabel="global training images/s (median)",
             title="Weak scaling, one core per worker (multiworker efficiency above)")
    axes.set_ylim(0, max(ideal) * 1.15)
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    drawing.tight_layout()
    drawing.savefig(figure("scaling.png"), dpi=110)


def plot_strategies(results: dict[Run, list[Result]], batches: Sequence[int]) -> None:
    plt = pyplot()
    if plt is None or not batches:
        return
    drawing, axes = plt.subplots(figsize=(7, 3.8))
    kinds = (("1 worker", Run("multiworker", 1, 0), "grey"), ("multiworker, 2 workers", Run("multiworker", 2, 0),
             "tab:blue"), ("parameter_server, 2 workers", Run("parameter_server", 2, 0), "tab:orange"))
    width = 0.27
    for offset, (label, kind, color) in enumerate(kinds):
        runs = [Run(kind.strategy, kind.workers, batch) for batch in batches]
        medians = [statistics.median(rates(results, run)) for run in runs]
        errors = [[m - min(rates(results, r)) for m, r in zip(medians, runs)],
                  [max(rates(results, r)) - m for m, r in zip(medians, runs)]]
        axes.bar([index + (offset - 1) * width for index in range(len(batches))], medians, width, yerr=errors,
                 label=label, color=color)
    axes.set_xticks(range(len(batches)), [str(batch) for batch in batches])
    axes.set(xlabel="batch per worker", ylabel="global training images/s (median, min-max)",
             title="Images/s per strategy, one core per task")
    axes.legend(loc="upper left", framealpha=1.0)
    drawing.tight_layout()
    drawing.savefig(figure("strategies.png"), dpi=110)
