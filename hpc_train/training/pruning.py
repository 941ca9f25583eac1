"""Stopping hopeless trials of a sweep: asynchronous successive halving (`prune: halving`). No TensorFlow here.

At the end of epochs 1, 2, 4, 8, ... (the rungs) an element of a sweep
compares its objective with those of the other elements that reached the
same epoch (their run folders' metrics.json, runs/NAME-ARRAYID_*/): in the
worse half, it stops itself (state "pruned", its checkpoint kept), and its
nodes go to the elements still waiting. The first to reach a rung has no one
to compare with and goes on: no element waits for another.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

# The objective and its direction: the one rule (the trainer takes objective_name from here).
from hpc_train.runs.objective import minimised, objective_name

from hpc_train.runs.metrics import epochs

_ELEMENT = re.compile(r"^(?P<sweep>.+-\d+)_(?P<index>\d+)$")


def is_rung(epoch: int) -> bool:
    """Epochs 1, 2, 4, 8, ...: where an element may be pruned."""
    return epoch >= 1 and epoch & (epoch - 1) == 0


def in_worse_half(own: float, others: Sequence[float], minimise: bool) -> bool:
    """Whether `own` ranks in the worse half of itself and `others` (ties go to the better side)."""
    if not others:
        return False
    better = sum(1 for value in others if (value < own if minimise else value > own))
    return better + 1 > math.ceil((len(others) + 1) / 2)


def siblings(output: Path) -> list[Path]:
    """The run folders of the other elements of the sweep this run folder belongs to (none if it is not one)."""
    match = _ELEMENT.match(output.name)
    if match is None:
        return []
    return [path for path in output.parent.glob(f"{match.group('sweep')}_*")
            if path != output and _ELEMENT.match(path.name) and path.is_dir()]


def figure_at(folder: Path, epoch: int, objective: str) -> float | None:
    """A run's objective at the end of `epoch`, from its metrics.json; None when it has not got there."""
    value = next((record.get(objective) for record in epochs(folder) if record.get("epoch") == epoch), None)
    return float(value) if isinstance(value, (int, float)) else None


def verdict(output: Path, epoch: int, objective: str, own: float | None) -> tuple[bool, int]:
    """(prune?, how many elements reached this epoch, this one included)."""
    if own is None:
        return False, 1
    others = [value for folder in siblings(output) if (value := figure_at(folder, epoch, objective)) is not None]
    return in_worse_half(own, others, minimised(objective)), len(others) + 1
