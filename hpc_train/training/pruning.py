"""Stopping hopeless trials of a sweep through its Optuna study (`prune: halving|median|hyperband`). No TensorFlow.

At the end of each epoch but the last, the chief of a sweep element reports its objective to the element's trial
(runs/study.py) and asks Optuna's pruner whether to stop: `halving` is asynchronous successive halving (the
worse half of the trials that reached epoch 1, 2, 4, 8, ... stops; the first to get there has no one to compare
with and goes on: no element waits for another), `median` stops below the median of the finished trials at the
same epoch, `hyperband` runs several halvings side by side. A pruned element stops itself (state "pruned", its
checkpoint kept) and its nodes go to the elements still waiting. The trial is then PRUNED in the study.
"""

from __future__ import annotations

from pathlib import Path

# The objective and its direction: the one rule (the trainer takes objective_name from here).
from hpc_train.runs.objective import objective_name
from hpc_train.runs import study

__all__ = ["objective_name", "reports", "verdict"]


def reports(output: Path) -> bool:
    """Whether this run is a sweep element with a trial in its study (its epochs are reported)."""
    return bool(study.read_trial(output))


def verdict(output: Path, epoch: int, own: float | None) -> bool:
    """Report the objective at the end of `epoch`; whether the pruner stops the element (its trial PRUNED)."""
    return own is not None and study.report(output, epoch, own)
