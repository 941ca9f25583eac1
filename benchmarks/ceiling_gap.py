"""Where the trainer's images/s go beyond its ceiling: one process, the conditions alternating, wall and CPU time.

`hpc-train bench trainer` compares the trainer with its ceiling (the same model and step on one constant batch)
in separate processes, by wall time; on a shared machine the noise of that is larger than the gap. This builds
the trainer's model once (hpc_train/bench/ceiling.py's way) and times whole epochs of `model.fit` on:
  constant                  one batch of the trainer's input, repeated (the ceiling);
  real input                the trainer's own input pipeline (the built-in MNIST task's);
  real input, autotune off  the same with tf.data's autotuning off;
  real input + callbacks    the same with the trainer's per-step callbacks (first steps, TensorBoard, progress
                            beat, stop check; not the epoch-end checkpoint, which the trainer's figure leaves out).
Rounds alternate the order; CPU time (this process, all threads) is what load on other processes disturbs least.
It prints each condition's median images/s and images per CPU-second, each against the constant batch's.

    python benchmarks/ceiling_gap.py DATA_DIR [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from hpc_train.config import load_config
from hpc_train.training.memory import keep_freed_memory
from hpc_train.training.threads import size_inter_op_pool

EPOCHS_PER_ROUND = 3


def main(data_dir: str, rounds: int) -> None:
    config = load_config(None, [f"data_dir={data_dir}", "epochs=1"])
    keep_freed_memory()
    size_inter_op_pool(config.inter_op_threads, config.strategy)
    from hpc_train.runs import attempts
    from hpc_train.training import inputs
    from hpc_train.training.callbacks import FirstSteps, ProgressBeat, StopAtStepBoundary
    from hpc_train.training.keras import keras, tf
    from hpc_train.training.precision import job_precision
    from hpc_train.training.strategy import make_strategy
    from hpc_train.training.trainer import compiled_model
    from hpc_train.training.usertask import load_task

    task, strategy = load_task(config.task), make_strategy(config)
    steps = inputs.epoch_steps(task, config, inputs.Pipelines(1, 1))
    model = compiled_model(config, strategy, task, steps, job_precision(config.precision, strategy).policy)
    real = inputs.training_fn(task, config, 0)(None)
    constant = tf.data.Dataset.from_tensors(real.take(1).get_single_element()).repeat()
    options = tf.data.Options()
    options.autotune.enabled = False
    folder = Path(tempfile.mkdtemp())

    def callbacks() -> list:
        return [FirstSteps(lambda seconds: None), keras.callbacks.TensorBoard(str(folder), write_graph=False),
                ProgressBeat(lambda step: attempts.write_progress(folder, step),
                             lambda: int(model.optimizer.iterations.numpy())),
                StopAtStepBoundary(lambda: None, lambda kind, due: (kind, due), lambda: "", 1 << 30)]

    conditions = {"constant": (constant, list), "real input": (real, list),
                  "real input, autotune off": (real.with_options(options), list),
                  "real input + callbacks": (real, callbacks)}
    timings: dict[str, list[tuple[float, float]]] = {name: [] for name in conditions}

    class Timer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: object = None) -> None:
            self.started = time.perf_counter(), time.process_time()

        def on_epoch_end(self, epoch: int, logs: object = None) -> None:
            timings[self.name].append((time.perf_counter() - self.started[0], time.process_time() - self.started[1]))

    for name, (data, more) in conditions.items():  # trace each once, outside the figures
        model.fit(data, epochs=1, steps_per_epoch=steps, verbose=0, callbacks=more())
    for round_ in range(rounds):
        for name in list(conditions) if round_ % 2 == 0 else list(reversed(conditions)):
            data, more = conditions[name]
            timer = Timer()
            timer.name = name
            model.fit(data, epochs=EPOCHS_PER_ROUND, steps_per_epoch=steps, verbose=0, callbacks=[timer, *more()])
    images = steps * config.batch_size
    wall, cpu = (statistics.median(t[0] for t in timings["constant"]),
                 statistics.median(t[1] for t in timings["constant"]))
    for name, values in timings.items():
        own_wall, own_cpu = statistics.median(t[0] for t in values), statistics.median(t[1] for t in values)
        print(f"{name:26} {images / own_wall:8,.0f} images/s ({wall / own_wall:6.1%})  "
              f"{images / own_cpu:8,.0f} images per CPU-second ({cpu / own_cpu:6.1%})")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 6)
