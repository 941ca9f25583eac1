"""Stopping hopeless trials of a sweep through its Optuna study (`prune: halving|median|hyperband`). No TensorFlow.

At the end of each epoch but the last, the chief of a sweep element reports its objective to the element's trial
(runs/study.py) and asks Optuna's pruner whether to stop: `halving` is asynchronous successive halving (the
worse half of the trials that reached epoch 1, 2, 4, 8, ... stops; the first to get there has no one to compare
with and goes on: no element waits for another), `median` stops below the median of the finished trials at the
same epoch, `hyperband` runs several halvings side by side. A pruned element stops itself (state "pruned", its
checkpoint kept) and its nodes go to the elements still waiting. The trial is then PRUNED in the study.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from hpc_train.errors import one_line

# The objective and its direction: the one rule (the trainer takes objective_name from here).
from hpc_train.runs.objective import objective_name
from hpc_train.runs import study

__all__ = ["objective_name", "reports", "verdict", "verdicts"]


def reports(output: Path) -> bool:
    """Whether this run is a sweep element with a trial in its study (its epochs are reported)."""
    return bool(study.read_trial(output))


def verdict(output: Path, epoch: int, own: float | None) -> bool:
    """Report the objective at the end of `epoch`; whether the pruner stops the element (its trial PRUNED)."""
    return own is not None and study.report(output, epoch, own)


def verdicts(output: Path, warn: Callable[[str], None] | None = None) -> Callable[[int, float | None], bool]:
    """`verdict` for the chief, that never raises: the other ranks wait for its answer in the job's agreement (an
    all-reduce), so an error of Optuna or of the study's storage would leave them there until the hang watchdog
    ends the step. The first error is warned of once (one line) and the element trains on, unpruned."""
    say = warn or (lambda line: print(line, file=sys.stderr, flush=True))
    broken: list[Exception] = []

    def decide(epoch: int, own: float | None) -> bool:
        if broken:
            return False
        try:
            return verdict(output, epoch, own)
        except Exception as error:  # (any: Optuna's, SQLAlchemy's, the journal's, a file's)
            broken.append(error)
            say(f"hpc-train: warning: pruning is off for this run: reporting epoch {epoch} to the study failed "
                f"({one_line(error)}); training goes on")
            return False

    return decide
