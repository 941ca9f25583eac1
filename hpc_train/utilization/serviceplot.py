"""report's picture of the job's data service: each process's CPU share over time (`data_service.png`), one line
for the dispatcher and one for each data worker, from the samples they wrote of themselves (service.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PICTURE = "data_service.png"

Series = dict[str, list[tuple[float, float]]]


def label(row: Mapping[str, Any]) -> str:
    """A process as the picture names it: `dispatcher node1:16391`, `worker node2:16390 (1 core)` (pure)."""
    cores = row.get("cores")
    return f"{row.get('role', '?')} {row.get('host', '?')}:{row.get('port', '?')}" + (
        f" ({cores} core{'s' if cores != 1 else ''})" if isinstance(cores, int) else "")


def cpu_series(rows: Sequence[Mapping[str, Any]]) -> Series:
    """Each process's (time, CPU % of its cores), in time order, the dispatcher first, then the workers by name
    (pure)."""
    series: Series = {}
    for row in sorted(rows, key=lambda row: row["t"]):
        series.setdefault(label(row), []).append((float(row["t"]), float(row["cpu"])))
    return dict(sorted(series.items(), key=lambda item: (not item[0].startswith("dispatcher"), item[0])))


def draw(rows: Sequence[Mapping[str, Any]], path: Path) -> bool:
    """The picture at `path`; False without a sample (a job without the service, sampling off) or matplotlib."""
    series = cpu_series(rows)
    if not series:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    start = min(points[0][0] for points in series.values())
    figure, axis = plt.subplots(figsize=(10, 3.5))
    for name, points in series.items():
        axis.plot([(t - start) / 60 for t, _ in points], [cpu for _, cpu in points], marker=".", markersize=3,
                  linewidth=1.2 if name.startswith("dispatcher") else 1, label=name,
                  linestyle="--" if name.startswith("dispatcher") else "-")
    axis.set_ylim(0, 105)
    axis.set_ylabel("CPU % of its cores", fontsize=8)
    axis.set_xlabel("minutes since the first sample", fontsize=8)
    axis.set_title("The data service's CPU use: the dispatcher (dashed) and each data worker", fontsize=9)
    axis.tick_params(labelsize=7)
    axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True
