"""Resuming: the newest checkpoint that reads back whole, and a warning for each one that does not.

Checkpoints are numbered by the global step they hold (`ckpt-<step>`), so one
saved mid-epoch sorts between the epochs around it. TensorFlow writes a
checkpoint's files under temporary names and renames them when complete, and
CheckpointManager deletes old checkpoints only after a new one is saved, so a
crash never leaves a run without a good checkpoint. A file damaged afterwards
(a truncated copy, a full disk) is caught here by reading every tensor before
restoring; the next older checkpoint is used instead.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpc_train.errors import HpcTrainError
from hpc_train.training.keras import tf

_NUMBER = re.compile(r"ckpt-(\d+)\.index$")


def checkpoints_newest_first(directory: Path) -> list[tuple[int, str]]:
    """(global step, checkpoint prefix) of every checkpoint in `directory`, newest first."""
    found = [(int(match.group(1)), str(path)[:-len(".index")])
             for path in directory.glob("ckpt-*.index") if (match := _NUMBER.search(path.name))]
    return sorted(found, reverse=True)


def readable(prefix: str) -> str | None:
    """None if every tensor of the checkpoint reads back; else what went wrong."""
    try:
        reader = tf.train.load_checkpoint(prefix)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    # The reader reports damage in several ways: "Read less bytes than requested" is an IndexError.
    except (tf.errors.OpError, ValueError, IndexError, OSError, RuntimeError) as error:
        return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
    return None


class CheckpointMismatch(HpcTrainError):
    """The output folder holds another model's checkpoints (another task's, or this one's changed)."""


def mismatch(prefix: str, output: Path, error: Exception) -> CheckpointMismatch:
    """One line: which checkpoint does not fit, why in TensorFlow's words, and the two ways on (pure)."""
    detail = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
    return CheckpointMismatch(f"checkpoint {prefix} does not fit this model ({detail}): {output} holds another "
                              f"model's run; give this one another --output-dir, or delete {output} to start afresh")


def restore_newest(checkpoint: Any, directory: Path) -> str | None:
    """Restore the newest readable checkpoint and return its prefix; None when there is none. One line
    (CheckpointMismatch) when it is another model's."""
    for _, prefix in checkpoints_newest_first(directory):
        problem = readable(prefix)
        if problem is None:
            try:
                checkpoint.restore(prefix)
            except (ValueError, tf.errors.InvalidArgumentError) as error:  # shapes or structure differ
                # Else TensorFlow lists every value left unrestored, a line each, as the process ends.
                tf.get_logger().setLevel("ERROR")
                raise mismatch(prefix, directory.parent, error) from None
            return prefix
        print(f"hpc-train: warning: checkpoint {prefix} is damaged ({problem}); trying the one before it",
              file=sys.stderr, flush=True)
    return None


class StepSaver:
    """Saves model and optimizer at the current global step, once per step.

    A stop right after an epoch's end reuses that epoch's checkpoint. Under
    ParameterServerStrategy it first waits for every step handed out to the
    workers, so that the saved step count is exact.
    """

    def __init__(self, manager: tf.train.CheckpointManager, model: Any) -> None:
        self.manager = manager
        self.model = model
        self.saved: dict[int, str] = {}
        # Each save's step and wall-clock seconds (metrics.json): the save is synchronous, so that is its whole
        # cost to the training loop.
        self.timings: list[dict[str, float]] = []
        self.last_end = time.perf_counter()  # when the last save ended (or this run's training began)
        self.after_save: list[Callable[[float], None]] = []  # told each save's seconds (the goodput ledger's)

    def __call__(self) -> str:
        coordinator = getattr(self.model, "_cluster_coordinator", None)
        if coordinator is not None:
            coordinator.join()
        step = int(self.model.optimizer.iterations.numpy())
        if step not in self.saved:
            started = time.perf_counter()
            self.saved[step] = self.manager.save(checkpoint_number=step)
            self.last_end = time.perf_counter()
            self.timings.append({"step": step, "seconds": round(self.last_end - started, 4)})
            for listener in self.after_save:
                listener(self.last_end - started)
        return self.saved[step]

    @property
    def last_seconds(self) -> float | None:
        return self.timings[-1]["seconds"] if self.timings else None


# Timed saves (checkpoint_minutes empty): as often as the share of time for saves allows, within these bounds.
AUTO_SAVE_SECONDS = (60.0, 900.0)


def save_interval(minutes: float | None, share: float, last_seconds: float | None) -> float:
    """Seconds between timed saves at step boundaries (pure): `minutes` if set (0: none, only epoch ends); else
    the last save's duration / share, from 1 to 15 minutes."""
    if minutes is not None:
        return minutes * 60 if minutes > 0 else float("inf")
    least, most = AUTO_SAVE_SECONDS
    budget = last_seconds / share if share and last_seconds else least
    return min(most, max(least, budget))


def timed_save_due(saver: StepSaver, minutes: float | None, share: float) -> Any:
    """Whether a step boundary is due for a save now, as a function of nothing (for StopAtStepBoundary)."""
    return lambda: time.perf_counter() - saver.last_end >= save_interval(minutes, share, saver.last_seconds)
