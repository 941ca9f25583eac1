"""Trainer throughput against a plain Keras script of the seeds' design, side by side in one process.

    .venv/bin/python benchmarks/bench_trainer.py [--data-dir DIR] [--rounds N] [--quick]

The seed script's model and dataset (`benchmarks/seed_train.py`) and the
trainer's own (`hpc_train.training`: model, compile settings, input pipeline)
are built in this one process and trained epoch by epoch in turns, so machine
noise (this is a shared VM) hits both alike; each round gives a ratio, and the
table reports medians and min-max over rounds. A check of the whole
`hpc-train train` command follows, from its metrics.json. Rewrites its section
of BENCHMARKS.md and benchmarks/trainer_throughput.png.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from report import ROOT, progress, pyplot, summary, write_section

PLOT = ROOT / "benchmarks" / "trainer_throughput.png"
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "mnist"
GOAL = 1.7
BASELINE = "plain Keras script, seed design, on tf-keras (baseline)"
KERAS3 = "the same script on Keras 3 (what tf.keras is on TF 2.21)"
DEFAULTS = "hpc-train trainer (defaults)"
BF16 = "hpc-train trainer, precision=mixed_bfloat16"


def contestants(data_dir: Path) -> dict[str, Callable[[], float]]:
    """name -> a function that trains one epoch and returns its images/s."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import keras as keras3
    import seed_train
    from hpc_train.mnist import load_mnist
    from hpc_train.training.keras import keras
    from hpc_train.training.model import build_model, compile_model
    from hpc_train.training.pipeline import training_dataset_fn

    splits = load_mnist(data_dir)
    seed_model, seed_data, steps = seed_train.build(splits.train_images, splits.train_labels)

    class EpochTimer(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.seconds: list[float] = []
            self._start = 0.0

        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            self._start = time.perf_counter()

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            self.seconds.append(time.perf_counter() - self._start)

    class Keras3Timer(keras3.callbacks.Callback):
        """The same timer for a Keras 3 model (Keras 3 accepts only its own callbacks)."""

        def __init__(self, timer: EpochTimer) -> None:
            super().__init__()
            self.timer = timer

        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            self.timer.on_epoch_begin(epoch)

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            self.timer.on_epoch_end(epoch)

    def trainer(precision: str):
        keras.mixed_precision.set_global_policy(precision)
        model = build_model("cnn")
        compile_model(model, "adam", 0.001, steps_per_execution=32)
        keras.mixed_precision.set_global_policy("float32")
        return model, training_dataset_fn(splits.train_images, splits.train_labels, 64, seed=0)(None)

    keras3_model, keras3_data, _ = seed_train.build(splits.train_images, splits.train_labels, keras3)
    runs = {BASELINE: (seed_model, seed_data, {}), KERAS3: (keras3_model, keras3_data, {}), DEFAULTS: (*trainer("float32"), {"verbose": 0}),
            BF16: (*trainer("mixed_bfloat16"), {"verbose": 0})}
    epochs = {name: 0 for name in runs}

    def epoch_of(name: str) -> Callable[[], float]:
        model, data, fit_options = runs[name]
        timer = EpochTimer()
        keras3_timer = Keras3Timer(timer)

        def run() -> float:
            # Two epochs per turn, timing the second: the first absorbs fit()'s own start-up,
            # which a real run pays once, not every epoch.
            with contextlib.redirect_stdout(io.StringIO()):  # the seed's progress bar, printed nowhere
                model.fit(data, epochs=epochs[name] + 2, initial_epoch=epochs[name], steps_per_epoch=steps,
                          callbacks=[timer if name != KERAS3 else keras3_timer], **fit_options)
            epochs[name] += 2
            return steps * 64 / timer.seconds[-1]

        return run

    return {name: epoch_of(name) for name in runs}


def measure(data_dir: Path, rounds: int) -> dict[str, list[float]]:
    runs = contestants(data_dir)
    for name, run in runs.items():
        progress(f"warm-up epoch: {name}")
        run()  # tracing and caching happen in the first epoch
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(rounds):
        order = list(runs) if round_ % 2 == 0 else list(reversed(runs))
        for name in order:
            samples[name].append(runs[name]())
        progress(f"round {round_ + 1}/{rounds}: " + ", ".join(f"{samples[n][-1]:,.0f}" for n in runs))
    return samples


def whole_command(data_dir: Path, epochs: int = 8) -> float:
    """Median training images/s of epochs 2.. of a real `hpc-train train` run."""
    with tempfile.TemporaryDirectory() as output:
        subprocess.run([sys.executable, "-m", "hpc_train.train", "--data-dir", str(data_dir), "--output-dir", output,
                        "--set", f"epochs={epochs}"], capture_output=True, text=True, check=True)
        epochs_run = json.loads((Path(output) / "metrics.json").read_text())["epochs"]
    return statistics.median(epoch["images_per_second"] for epoch in epochs_run[1:])


def render(samples: dict[str, list[float]], command_rate: float | None) -> str:
    baseline = samples[BASELINE]
    rounds = len(baseline)
    lines = [
        "## Trainer, one worker",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, CPU only (a shared VM: single runs vary by up to "
        "2x, hence turns in one process). Command: `.venv/bin/python benchmarks/bench_trainer.py`. The default CNN "
        "on the first 8,000 MNIST test images, batch 64; one epoch each in turn after a warm-up epoch, "
        f"{rounds} rounds.",
        "",
        f"Goal: the trainer at least {GOAL}x the plain Keras script (`benchmarks/seed_train.py`: "
        "`from_tensor_slices -> shuffle -> repeat -> batch`, default `compile`, `fit`'s default progress bar).",
        "",
        "| run | images/s, median | min-max | ratio to baseline, median of rounds | min-max |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, values in samples.items():
        median, low, high = summary(values)
        ratios = [value / base for value, base in zip(values, baseline)]
        ratio, ratio_low, ratio_high = summary(ratios)
        lines.append(f"| {name} | {median:,.0f} | {low:,.0f}-{high:,.0f} | {ratio:.2f}x | "
                     f"{ratio_low:.2f}-{ratio_high:.2f} |")
    if command_rate is not None:
        lines += ["", f"Check, the whole command: `hpc-train train --set epochs=8` trained at {command_rate:,.0f} "
                      "images/s (median of epochs 2-8, its metrics.json)."]
    lines += [
        "",
        "Where the time went: the seed runs one step per call into TensorFlow (`steps_per_execution=1`) and its "
        "progress bar reads the loss back after every step, so Python and TensorFlow take turns every 64 images. "
        "The trainer runs 32 steps per call, normalises the images once into a cache, prefetches, and updates "
        "each weight with one fused optimizer kernel (Keras' legacy optimizers; the newer ones were about 10% "
        "slower here). XLA "
        "(`jit_compile`) was slower on this CPU. `mixed_bfloat16` uses the CPU's bf16 units; it is an option, "
        "not the default, because it changes the arithmetic.",
        "",
        f"![images/s per run]({PLOT.relative_to(ROOT)})",
    ]
    return "\n".join(lines)


def plot(samples: dict[str, list[float]]) -> None:
    plt = pyplot()
    if plt is None:
        return
    names = list(samples)
    medians = [statistics.median(samples[name]) for name in names]
    errors = [[m - min(samples[n]) for m, n in zip(medians, names)],
              [max(samples[n]) - m for m, n in zip(medians, names)]]
    figure, axes = plt.subplots(figsize=(8, 3.6))
    colors = ["tab:blue" if name.startswith("hpc-train") else "grey" for name in names]
    axes.barh(range(len(names)), medians, xerr=errors, color=colors)
    axes.set_yticks(range(len(names)), [textwrap.fill(name, 30) for name in names])
    axes.axvline(medians[0] * GOAL, color="red", linestyle=":", label=f"goal: {GOAL}x baseline")
    axes.set(xlabel="training images/s (median, min-max)", title="MNIST CNN, one worker, batch 64")
    axes.invert_yaxis()
    axes.legend(loc="upper right", framealpha=1.0)
    figure.tight_layout()
    figure.savefig(PLOT, dpi=110)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="4 rounds, no command check; print only")
    args = parser.parse_args(argv)
    samples = measure(args.data_dir, 4 if args.quick else args.rounds)
    command_rate = None if args.quick else whole_command(args.data_dir)
    section = render(samples, command_rate)
    print(section)
    if not args.quick:
        write_section("bench_trainer", section)
        plot(samples)
        progress("wrote BENCHMARKS.md and " + str(PLOT.relative_to(ROOT)))
    ratio = statistics.median(d / b for d, b in zip(samples[DEFAULTS], samples[BASELINE]))
    return 0 if ratio >= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
