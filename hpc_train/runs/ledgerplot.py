"""`report`'s picture of the goodput ledger, ledger.png: a stacked bar per attempt of a job, per trial of a sweep
or a pack with the sweep's total, each bar its wall time's shares in the ledger's categories."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hpc_train.runs import goodput
from hpc_train.runs.ledger import CATEGORIES, shares
from hpc_train.runs.packed import read_pack_state

PICTURE = "ledger.png"
COLOURS = {"startup": "#9e9e9e", "input": "#e6550d", "compute": "#31a354", "checkpoint": "#3182bd",
           "evaluation": "#9ecae1", "lost": "#de2d26", "idle": "#fdd0a2", "other": "#636363"}


def bars(folders: Sequence[Path], sweep: bool, pack: Mapping[str, Any] | None = None,
         now: float | None = None) -> list[tuple[str, Mapping[str, float]]]:
    """(label, seconds per category) for each bar (but for reading the folders, pure): a job's attempts (and their
    total when there are several); a sweep's trials and its total in node-seconds, a pack's slots with no trial
    idle (`pack`: its pack state)."""
    now = time.time() if now is None else now
    made = [goodput.make_ledger(folder, now) for folder in folders]
    if not sweep:
        rows = made[0]["attempts"] if made else []
        drawn = [(f"attempt {row['attempt']}", row) for row in rows]
        return drawn + ([("total", made[0]["total"])] if len(rows) > 1 else [])
    trials = [(f"trial {index}", ledger["total"]) for index, ledger in enumerate(made) if ledger["attempts"]]
    total = {name: sum(row[name] * max(1, int(row.get("nodes") or 1)) for ledger in made
                       for row in ledger["attempts"]) for name in CATEGORIES}
    total["idle"] += goodput.pack_idle(pack, now) if pack else 0.0
    return trials + ([("sweep (node-s)", total)] if trials else [])


def draw(plt: Any, drawn: Sequence[tuple[str, Mapping[str, float]]]) -> Any:
    """The figure (pyplot given): one horizontal bar per entry, its categories' shares stacked."""
    figure, axis = plt.subplots(figsize=(8, 1.4 + 0.45 * len(drawn)))
    labels = [label for label, _ in drawn]
    left = [0.0] * len(drawn)
    for name in CATEGORIES:
        widths = [100 * shares(seconds)[name] for _, seconds in drawn]
        axis.barh(labels, widths, left=left, color=COLOURS[name], label=name)
        left = [start + width for start, width in zip(left, widths)]
    for index, (_, seconds) in enumerate(drawn):
        wall = sum(seconds.get(name, 0.0) for name in CATEGORIES)
        axis.text(101, index, f"{wall:.0f} s", va="center", fontsize=8)
    axis.invert_yaxis()
    axis.set_xlim(0, 112)
    axis.set_xlabel("share of the allocation's wall time (%); goodput is compute's")
    axis.legend(ncol=len(CATEGORIES), fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False,
                handlelength=1.2, columnspacing=1.0)
    figure.tight_layout()
    return figure


def plot(folders: Sequence[Path], sweep: bool, path: Path, pack: Mapping[str, Any] | None = None) -> bool:
    """ledger.png at `path`; False when there is nothing to draw or no matplotlib."""
    drawn = bars(folders, sweep, pack)
    if not drawn:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure = draw(plt, drawn)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return True


def report_line(folder: Path, folders: Sequence[Path], sweep: bool, pack: Mapping[str, Any] | None = None
                ) -> str | None:
    """`report`'s line once ledger.png is drawn into `folder` (the job's, or the sweep's); None when not."""
    path = Path(folder) / PICTURE
    return f"wrote {path} (the goodput ledger: where the allocation's time went)" if plot(folders, sweep, path,
                                                                                          pack) else None
