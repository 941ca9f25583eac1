"""Callbacks: progress lines and metrics.json (chief only), checkpoints, and stopping at a step boundary.

Only StopAtStepBoundary has a batch hook, and it accepts TensorFlow's own
logs (`_supports_tf_logs`), the one kind ParameterServerStrategy allows.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpc_train.runs.metrics import UnreadableMetrics, metrics_path, read_metrics, write_metrics
from hpc_train.training.clock import seconds_since_process_start
from hpc_train.training.keras import keras, tf
from hpc_train.training.stopping import StopKind


class EpochReport(keras.callbacks.Callback):
    """One line per epoch on the chief, and `run_dir`'s metrics.json rewritten after each epoch (None: not written).

    Epochs recorded by an earlier run that this one resumes are kept. An epoch
    that an earlier run had begun counts only the steps trained here.
    """

    def __init__(self, run_dir: Path | None, global_batch: int, total_epochs: int,
                 summary: dict[str, Any], print_line: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.global_batch = global_batch
        self.total_epochs = total_epochs
        self.summary = summary
        self.print_line = print_line or (lambda line: print(line, flush=True))
        self.epochs: list[dict[str, Any]] = []
        self._started = 0.0
        self._trained: float | None = None

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self.epochs = self._earlier_epochs()

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.epochs = [record for record in self.epochs if record["epoch"] <= epoch]
        self._started = time.perf_counter()
        self._trained = None

    def on_test_begin(self, logs: dict[str, Any] | None = None) -> None:
        # fit() validates after the epoch's training steps: images/s counts training alone.
        if self._trained is None:
            self._trained = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        now = time.perf_counter()
        training_seconds = (self._trained or now) - self._started
        images = self.params["steps"] * self.global_batch  # this fit's steps: fewer in a resumed epoch
        values = _figures(logs or {})
        record = {"epoch": epoch + 1, **values, "seconds": round(now - self._started, 3),
                  "training_seconds": round(training_seconds, 3), "images": images,
                  "images_per_second": round(images / training_seconds, 1),
                  **({"nodes": self.summary["nodes"]} if "nodes" in self.summary else {})}  # a node range's size
        self.epochs.append(record)
        shown = "  ".join(f"{name} {value:.4f}" for name, value in values.items())
        self.print_line(f"epoch {epoch + 1}/{self.total_epochs}  {shown}  {record['seconds']:.1f} s  "
                        f"{record['images_per_second']:.0f} images/s")
        self.write()

    def write(self, totals: dict[str, Any] | None = None) -> None:
        if self.run_dir is None:
            return
        seconds = sum(record["seconds"] for record in self.epochs)
        training_seconds = sum(record["training_seconds"] for record in self.epochs)
        images = sum(record.get("images", 0) for record in self.epochs)
        summary_totals = {"epochs": len(self.epochs), "seconds": round(seconds, 3), "images": images,
                          "images_per_second": round(images / training_seconds, 1) if training_seconds else None,
                          **_failure_totals(self.summary.get("failures")), **(totals or {})}
        write_metrics(self.run_dir, {**self.summary, "epochs": self.epochs, "totals": summary_totals})

    def _earlier_epochs(self) -> list[dict[str, Any]]:
        if self.run_dir is None:
            return []
        try:
            found = read_metrics(self.run_dir, strict=True).get("epochs", [])
        except UnreadableMetrics:
            print(f"hpc-train: warning: {metrics_path(self.run_dir)} is unreadable; starting its epoch list afresh",
                  file=sys.stderr)
            return []
        return [record for record in found if isinstance(record, dict)] if isinstance(found, list) else []


def _failure_totals(failures: Any) -> dict[str, Any]:
    """The failures a retried run went through, and the time they cost (from each failure's last checkpoint to
    training again), for metrics.json's totals."""
    if not isinstance(failures, dict):
        return {}
    return {"failures": failures.get("count", 0), "seconds_lost_to_failures": failures.get("seconds_lost", 0.0)}


def _figures(logs: dict[str, Any]) -> dict[str, float]:
    """Every figure Keras logged for the epoch, in its order: loss, the task's metrics, then validation's."""
    figures = {}
    for name, value in logs.items():
        try:
            figures[name] = float(value)
        except (TypeError, ValueError):
            continue  # not one number (a metric of several values): left out of the line and metrics.json
    return figures


class FirstSteps(keras.callbacks.Callback):
    """Reports once how long after the process started the first training steps were done.

    Start-up time is a cost every restart pays again (a requeued job included).
    """

    def __init__(self, report: Callable[[float], None]) -> None:
        super().__init__()
        self._supports_tf_logs = True  # ignores the logs: allowed under ParameterServerStrategy
        self.report = report
        self.done = False

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if not self.done:
            self.done = True
            self.report(seconds_since_process_start())


class EpochCheckpoint(keras.callbacks.Callback):
    """Save model and optimizer at epoch ends, numbered by the global step, within a share of the training time.

    A save costs the same whatever an epoch's length (tens of milliseconds for a
    small model, seconds for a large one), so saving after every short epoch
    would cost more than the work it protects. An epoch's end is saved when at
    least `last save's duration / share` seconds have passed since the last
    save (share 0.03: saves take at most about 3% of the time); the first and
    the last epoch are always saved, and so is every stop (StopAtStepBoundary).
    `agree` makes the decision the job's (any rank's "save"): every
    MultiWorkerMirrored worker takes part in a save, so they must all make it.
    """

    def __init__(self, save: Callable[[], str], total_epochs: int, share: float,
                 agree: Callable[[bool], bool] = lambda wanted: wanted,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        super().__init__()
        self.save = save
        self.total_epochs = total_epochs
        self.share = share
        self.agree = agree
        self.clock = clock
        self._last_end: float | None = None
        self._last_seconds = 0.0

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if self.agree(self._due(epoch)):
            started = self.clock()
            self.save()
            self._last_end = self.clock()
            self._last_seconds = self._last_end - started

    def _due(self, epoch: int) -> bool:
        if self._last_end is None or not self.share or epoch + 1 >= self.total_epochs:
            return True
        return self.clock() - self._last_end >= self._last_seconds / self.share


class StoppedEarly(Exception):
    """Every rank stopped at the same step boundary, after saving, because one was asked to."""

    def __init__(self, kind: StopKind, checkpoint: str) -> None:
        super().__init__(f"stopped ({kind.name.lower()}) after saving {checkpoint}")
        self.kind = kind
        self.checkpoint = checkpoint


class StopAtStepBoundary(keras.callbacks.Callback):
    """After each call into TensorFlow (`steps_per_execution` steps), stop if any rank was asked to; save if due.

    `agree` turns this rank's request into the job's (the strongest request of
    any rank): every rank of a MultiWorkerMirrored job must stop after the same
    step, or the others would wait for it in the next all-reduce. Then every
    rank saves, waits for the others to have saved, and leaves `fit` by raising
    StoppedEarly: no validation, nothing counted as finished. An epoch whose
    last step is done ends first (validated, reported, saved), so that it
    counts; after the last epoch, finishing beats stopping. Keep this callback
    after the checkpoint and report callbacks: its epoch end comes after theirs.

    The same agreement carries `save_due` (checkpoint_minutes): a timed save at
    a step boundary, by every rank together, so that a crash loses at most that
    much training, and the run resumes there exactly.
    """

    def __init__(self, requested: Callable[[], StopKind | None],
                 agree: Callable[[StopKind | None, bool], tuple[StopKind | None, bool]], save: Callable[[], str],
                 total_epochs: int, save_due: Callable[[], bool] = lambda: False) -> None:
        super().__init__()
        self._supports_tf_logs = True  # it ignores the logs, so it may run under ParameterServerStrategy
        self.requested = requested
        self.agree = agree
        self.save = save
        self.total_epochs = total_epochs
        self.save_due = save_due

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if batch + 1 < self.params["steps"]:  # `batch`: the last step of this call, counted from 0
            self._stop_if_asked(self.save_due())

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if epoch + 1 < self.total_epochs:
            self._stop_if_asked(False)  # the epoch's own checkpoint is EpochCheckpoint's

    def _stop_if_asked(self, save_due: bool) -> None:
        kind, save = self.agree(self.requested(), save_due)
        if kind is None:
            if save:
                self.save()
            return
        checkpoint = self.save()
        self.agree(None, False)  # a barrier: nobody exits (and so ends the step) before everyone has saved
        raise StoppedEarly(kind, checkpoint)


class Pruned(Exception):
    """Every rank saved and stopped: the sweep's pruner stopped this element (pruning.py)."""

    def __init__(self, epoch: int, checkpoint: str, reason: str) -> None:
        super().__init__(f"pruned after epoch {epoch}: {reason}")
        self.epoch = epoch
        self.checkpoint = checkpoint
        self.reason = reason


class PruneAtRungs(keras.callbacks.Callback):
    """At the end of each epoch but the last, ask `decide` (the chief's verdict, its objective reported to the
    study, which decides at its own rungs; others say no); the job's answer (`agree`) stops every rank after a save.
    Keep it after the report (metrics.json) and the checkpoint callbacks."""

    def __init__(self, decide: Callable[[int, dict[str, Any]], str | None], agree: Callable[[bool], bool],
                 save: Callable[[], str], total_epochs: int) -> None:
        super().__init__()
        self.decide = decide
        self.agree = agree
        self.save = save
        self.total_epochs = total_epochs

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if epoch + 1 >= self.total_epochs:
            return
        reason = self.decide(epoch + 1, dict(logs or {}))
        if self.agree(reason is not None):
            checkpoint = self.save()
            self.agree(False)  # a barrier: nobody exits before everyone has saved
            raise Pruned(epoch + 1, checkpoint, reason or "another rank's verdict")


class ProgressBeat(keras.callbacks.Callback):
    """On the chief: the global step, every few seconds, into the run folder, for the steps a failure makes the
    run redo (attempts.py)."""

    def __init__(self, write: Callable[[int], None], step: Callable[[], int], every: float = 1.0) -> None:
        super().__init__()
        self._supports_tf_logs = True  # ignores the logs: allowed under ParameterServerStrategy
        self.write = write
        self.step = step
        self.every = every
        self._last = 0.0

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        now = time.monotonic()
        if now - self._last >= self.every:
            self._last = now
            self.write(self.step())


def any_rank(strategy: tf.distribute.Strategy) -> Callable[[bool], bool]:
    """Whether any rank of the job says yes: one tiny all-reduce under MultiWorkerMirrored, else this rank's."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return lambda wanted: wanted
    total = summed_over_ranks(strategy)
    return lambda wanted: bool(total(tf.constant(float(wanted))).numpy() > 0)


def agreement(strategy: tf.distribute.Strategy) -> Callable[[StopKind | None, bool],
                                                             tuple[StopKind | None, bool]]:
    """The job-wide stop request and save decision from this rank's own: one tiny all-reduce under
    MultiWorkerMirrored (a stop is the strongest any rank asks for; a save, if any rank finds it due).

    In one process (or on the chief of a parameter-server job, the only rank
    that runs the training loop) this rank's own request is the job's.
    """
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return lambda kind, save: (kind, save)
    # Summing one-hot requests over every replica: a kind is wanted when its sum is above 0; the save flag last.
    strongest = summed_over_ranks(strategy)

    def agree(kind: StopKind | None, save: bool) -> tuple[StopKind | None, bool]:
        local = [float(kind is member) for member in StopKind] + [float(save)]
        *counts, saves = strongest(tf.constant(local)).numpy()
        wanted = [member for member, count in zip(StopKind, counts) if count > 0]
        return (max(wanted) if wanted else None), bool(saves > 0)

    return agree


def summed_over_ranks(strategy: tf.distribute.Strategy) -> Callable[[tf.Tensor], tf.Tensor]:
    """A function summing a small tensor over every replica of the job (its own trace, one all-reduce a call)."""

    @tf.function
    def total(local: tf.Tensor) -> tf.Tensor:
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.identity(local)), axis=None)

    return total
