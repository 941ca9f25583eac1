"""report's picture of a job's utilization: a timeline per GPU (utilization and memory), idle spans shaded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PICTURE = "utilization.png"

Series = dict[tuple[str, str], list[tuple[float, float, float, tuple[int, ...]]]]


def gpu_series(rows: Sequence[Mapping[str, Any]]) -> Series:
    """Each GPU's (time, utilization %, memory %, ranks), in time order (pure)."""
    series: Series = {}
    for row in rows:
        for gpu in row.get("gpus") or ():
            try:
                memory = 100.0 * gpu["mem"] / gpu["mem_total"] if gpu.get("mem_total") else 0.0
                point = (float(row["t"]), float(gpu["util"]), memory, tuple(gpu.get("ranks") or ()))
            except (KeyError, TypeError, ValueError, AttributeError):
                continue  # not a GPU this version wrote
            series.setdefault((row["node"], str(gpu["gpu"])), []).append(point)
    return series


def draw(rows: Sequence[Mapping[str, Any]], path: Path) -> bool:
    """The timeline at `path`; False without a GPU sampled (or without matplotlib)."""
    series = gpu_series(rows)
    if not series:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    start = min(points[0][0] for points in series.values())
    below = float(rows[-1].get("idle_below", 5.0))
    keys = sorted(series, key=lambda key: (key[0], int(key[1]) if key[1].isdigit() else 1 << 30, key[1]))
    figure, axes = plt.subplots(len(keys), 1, figsize=(10, 0.4 + 1.1 * len(keys)), sharex=True, squeeze=False)
    for axis, key in zip(axes[:, 0], keys):
        points = series[key]
        minutes = [(t - start) / 60 for t, *_ in points]
        axis.plot(minutes, [util for _, util, _, _ in points], color="tab:green", linewidth=1, label="utilization")
        axis.plot(minutes, [memory for _, _, memory, _ in points], color="tab:blue", linewidth=0.8, linestyle="--",
                  label="memory")
        axis.fill_between(minutes, 0, 100, where=[util < below for _, util, _, _ in points], step="post",
                          color="tab:red", alpha=0.15, linewidth=0)
        ranks = points[-1][3]
        axis.set_ylabel(f"{key[0]}\nGPU {key[1]}" + (f"\nrank {','.join(map(str, ranks))}" if ranks else ""),
                        fontsize=7, rotation=0, ha="right", va="center")
        axis.set_ylim(0, 105)
        axis.tick_params(labelsize=7)
    axes[0, 0].set_title(f"GPU utilization (green) and memory (dashed), % over time; shaded: under {below:g}%",
                         fontsize=9)
    axes[-1, 0].set_xlabel("minutes since the first sample")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True
