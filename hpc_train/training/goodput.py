"""The step-level part of the goodput ledger: a Keras callback timing `input`, `compute`, `checkpoint` and
`evaluation` in a training run, the trainer's and a user's own `model.fit` (docs/goodput.md).

Per-step callbacks cannot see a step wait for its data: under `steps_per_execution` many steps run in one call
into TensorFlow, and the wait is inside it. So the callback wraps the model's compiled train function once
(`on_train_begin`, after fit made it): the same Keras step, but each `next(iterator)` stamped before and after
with `tf.timestamp()` inside the compiled function, the stamp before ordered after the previous step's update
(the train counter's), the one after after the batch arrived; their differences add up in a variable read only
at epoch ends and saves. `input` is that sum, `compute` the rest of the training steps' wall time (the calls
into TensorFlow and the callbacks' per-step work: the stop agreement, a collective), `evaluation` validation
(on_test_begin to on_test_end), `checkpoint` the saves' blocking time (`saved`, told by the saver).
Under ParameterServerStrategy (its steps scheduled on the workers) the train function is left alone: its input
wait is not measured, and counts as compute.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hpc_train.runs.goodput import attempt_number, ledger_on, note_ranks, write_ledger
from hpc_train.runs.hparams import tensorboard_dir
from hpc_train.runs.ledger import STEP_CATEGORIES, input_share
from hpc_train.training.keras import keras, tf
from hpc_train.version import PREFIX

# An epoch whose steps waited on the input pipeline more than this gets one line (once an attempt).
INPUT_SHARE_WARNING = 0.25
INPUT_HELP = ("what helps: more parallel reads and maps (num_parallel_calls=tf.data.AUTOTUNE), prefetch, cache "
              "a dataset that fits in memory, more CPU cores per task (--cpus-per-task), data on a faster filesystem")
# The last epochs' input shares kept in the ranks' measures (`epochs`), for the job body's `--data-workers auto`
# (injob/servicesizer.py), which reads the newest.
EPOCHS_KEPT = 4
# Training done, the process still running this long after: one line saying the allocation is held.
HELD_AFTER_SECONDS = 60.0


class WaitStamps:
    """An iterator that hands on `iterator`'s elements, adding the time each `next` waited to `waited`
    (inside a compiled function: stamped with tf.timestamp around the get_next)."""

    def __init__(self, iterator: Any, waited: tf.Variable, after: Callable[[], Any]) -> None:
        self.iterator, self.waited, self.after = iterator, waited, after

    def __iter__(self) -> "WaitStamps":
        return self

    def __next__(self) -> Any:
        with tf.control_dependencies([self.after()]):  # asked once the previous step's update is done
            asked = tf.timestamp()
        with tf.control_dependencies([asked]):
            data = next(self.iterator)
        with tf.control_dependencies(tf.nest.flatten(data, expand_composites=True)):
            arrived = tf.timestamp()
        self.waited.assign_add(arrived - asked)  # (a stateful op: it runs, in order, with nothing waiting on it)
        return data

    def get_next(self) -> Any:
        return next(self)


def stamped_train_function(model: Any, waited: tf.Variable) -> Any:
    """The model's train function, its iterator's waits stamped; None where it cannot be (parameter servers)."""
    original = model.train_function
    if getattr(model, "_cluster_coordinator", None) is not None or original is None:
        return None
    if getattr(original, "stamps_waits", False):
        return original  # a later fit of the same model: wrapped already
    inner = getattr(original, "python_function", original)
    if not model.run_eagerly:  # Keras' loop over steps_per_execution, as its own tf.function converts it
        inner = tf.autograph.to_graph(inner)

    def after() -> Any:
        return model._train_counter.read_value()

    def stamped(iterator: Any) -> Any:
        return inner(WaitStamps(iterator, waited, after))

    wrapped = stamped if model.run_eagerly else tf.function(stamped, reduce_retracing=True)
    wrapped.stamps_waits = True
    return wrapped


class Goodput(keras.callbacks.Callback):
    """Times a `model.fit`'s input wait, compute, checkpoints and validation for the goodput ledger.

    Put it first among the callbacks (its epoch end then comes before the others' saves). `run_dir`: where its
    measures go (`.ledger/ranks-N.json`; the job's run folder, `$HPC_TRAIN_RUN_DIR`, for a user's command), None
    to keep them in `totals()` alone. `say`: where its lines go. A save's seconds reach it by `saved(seconds)`
    (the trainer's saver calls it; a user's own ModelCheckpoint is counted as compute).
    """

    def __init__(self, run_dir: str | Path | None = None, attempt: int | None = None,
                 say: Callable[[str], None] | None = None, tensorboard: str | Path | None = None) -> None:
        super().__init__()
        self._supports_tf_logs = True  # ignores the logs: allowed under ParameterServerStrategy
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.attempt = attempt
        self.say = say or (lambda line: print(line, file=sys.stderr, flush=True))
        self.tensorboard = Path(tensorboard) if tensorboard is not None else None
        self._writer: Any = None
        with tf.init_scope():
            self.waited = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="goodput_input_wait")
        self.first_steps: float | None = None
        self.trained: float | None = None  # when the last fit returned
        self.seconds = dict.fromkeys(STEP_CATEGORIES, 0.0)
        self.kept: dict[str, float] | None = None
        self._wait_base = 0.0  # the variable at the first steps (their wait is start-up's)
        self._window: float | None = None  # when the training steps' window opened (perf_counter)
        self._in_window_saves = 0.0
        self._closed_steps = 0.0  # training windows' seconds, closed ones
        self._testing: float | None = None
        self._epoch_start: dict[str, float] = {}
        self._epoch_began = 0.0
        self._epoch_steps = 0  # the epoch's measured steps (the first call's are start-up's, as its time is)
        self._call_began = 0  # the first step of Keras' current call (steps_per_execution steps a call)
        self.epochs: list[dict[str, float]] = []  # the last EPOCHS_KEPT epochs' input shares, when each began and ended
        self._warned = False
        self._held_line: threading.Timer | None = None

    # Keras' hooks.
    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        if self._held_line is not None:  # a later fit (the trainer's next stretch): training goes on
            self._held_line.cancel()
            self._held_line = None
        stamped = stamped_train_function(self.model, self.waited)
        if stamped is not None:
            self.model.train_function = stamped

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch_start = self.totals()
        self._epoch_began = time.time()
        self._epoch_steps = 0
        self.trained = None  # (a later fit of the trainer's stretches trains again)

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._call_began = batch
        if self.first_steps is not None and self._window is None:
            self._window = time.perf_counter()

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self.first_steps is None:  # the first call: tracing, the first steps; start-up's until done
            self.first_steps = time.time()
            self._wait_base = float(self.waited.numpy())
            self._window = time.perf_counter()
            self._write()
        else:  # (Keras passes a call's first step to _begin and its last to _end)
            self._epoch_steps += max(1, batch - self._call_began + 1)

    def on_test_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._close_window()
        self._testing = time.perf_counter()

    def on_test_end(self, logs: dict[str, Any] | None = None) -> None:
        if self._testing is not None:
            self.seconds["evaluation"] += time.perf_counter() - self._testing
            self._testing = None

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._close_window()
        now = self.totals()
        waited = now["input"] - self._epoch_start.get("input", 0.0)
        computed = now["compute"] - self._epoch_start.get("compute", 0.0)
        share = input_share(waited, computed)
        if share > INPUT_SHARE_WARNING and not self._warned:
            self._warned = True
            self.say(f"hpc-train: input: the training steps of epoch {epoch + 1} waited on the input pipeline "
                     f"{share:.0%} of their time; {INPUT_HELP}")
        self.epochs = [*self.epochs, {"epoch": epoch + 1, "input_share": round(share, 4),
                                      "steps_seconds": round(waited + computed, 3), "steps": self._epoch_steps,
                                      "began": round(self._epoch_began, 3), "ended": round(time.time(), 3)}
                       ][-EPOCHS_KEPT:]
        self._write(ledger=True)
        self._to_tensorboard(epoch, now, share)

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        self._close_window()
        self.trained = round(time.time(), 3)
        self._write(ledger=True)
        if self.run_dir is not None:  # a job's chief
            self._held_line = held_after_training(self.say)

    # The saver's.
    def saved(self, seconds: float) -> None:
        """A save of `seconds` just ended: checkpoint time, and what a later failure does not throw away."""
        self.seconds["checkpoint"] += seconds
        if self._window is not None:
            self._in_window_saves += seconds  # inside the steps' window: not compute
        self.kept = {**self.totals(), "time": round(time.time(), 3)}
        self._write()

    def totals(self) -> dict[str, float]:
        """The step categories' seconds so far (cumulative over this callback's fits)."""
        steps = self._closed_steps + (time.perf_counter() - self._window if self._window is not None else 0.0)
        waited = max(0.0, float(self.waited.numpy()) - self._wait_base) if self.first_steps is not None else 0.0
        compute = max(0.0, steps - waited - self._in_window_saves)
        return {"input": round(waited, 4), "compute": round(compute, 4),
                "checkpoint": round(self.seconds["checkpoint"], 4), "evaluation": round(self.seconds["evaluation"], 4)}

    def _to_tensorboard(self, epoch: int, totals: dict[str, float], share: float) -> None:
        """The epoch's input share and the step categories' seconds so far, under `ledger/` in TensorBoard."""
        if self.tensorboard is None:
            return
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(str(self.tensorboard / "ledger"))
        with self._writer.as_default():
            tf.summary.scalar("ledger/input_share", share, step=epoch + 1)
            for name, seconds in totals.items():
                tf.summary.scalar(f"ledger/{name}_seconds", seconds, step=epoch + 1)
        self._writer.flush()

    def _close_window(self) -> None:
        if self._window is not None:
            self._closed_steps += time.perf_counter() - self._window
            self._window = None

    def _write(self, ledger: bool = False) -> None:
        """The measures into the run folder; at an epoch's end ledger.json too."""
        if self.run_dir is None:
            return
        record = {"first_steps": self.first_steps, "totals": self.totals(), "last": round(time.time(), 3),
                  "trained": self.trained}
        if self.kept is not None:
            record["kept"] = self.kept
        if self.epochs:
            record["epochs"] = self.epochs
        note_ranks(self.run_dir, self.attempt or 1, record)
        if ledger:
            write_ledger(self.run_dir)


def held_after_training(say: Callable[[str], None], after: float = HELD_AFTER_SECONDS) -> threading.Timer:
    """A line, `after` seconds from now, that training stopped but the job still holds its allocation (a
    process that has left by then says nothing: the timer's thread does not keep it)."""
    timer = threading.Timer(after, lambda: say(
        f"hpc-train: training stopped {after:.0f} s ago, but the job still holds its allocation (the process has "
        "not ended: a teardown or a peer it waits for); its time counts as idle in the ledger"))
    timer.daemon = True
    timer.start()
    return timer


def trainers_goodput(paths: Any, saver: Any, say: Callable[[str], None]) -> list[Goodput]:
    """The trainer's callback, none with the ledger off (HPC_TRAIN_LEDGER=0): every rank times its steps, the
    chief writes (`paths`: the rank's RunPaths) and says; the saver (checkpoints.StepSaver) tells it each save's
    seconds."""
    import os

    if not ledger_on(os.environ):
        return []
    chief = paths.rank.is_chief
    goodput = Goodput(paths.output if chief else None, attempt_number(os.environ),
                      (lambda line: say(line.removeprefix(f"{PREFIX}: "))) if chief else lambda line: None,
                      tensorboard_dir(paths.output) if chief else None)  # (`say` puts the prefix: once)
    saver.after_save.append(goodput.saved)
    return [goodput]


def for_this_job(environ: Mapping[str, str] | None = None, say: Callable[[str], None] | None = None) -> Goodput:
    """The callback for a user's own `model.fit` in a job hpc-train runs: measures into the job's run folder
    ($HPC_TRAIN_RUN_DIR) for its attempt, written by rank 0 alone (docs/goodput.md)."""
    import os

    env = os.environ if environ is None else environ
    folder = env.get("HPC_TRAIN_RUN_DIR") if env.get("SLURM_PROCID", "0") == "0" else None
    return Goodput(folder, attempt_number(env), say)
