"""A user's task under `hpc-train train --task` against the same task in a plain `model.fit`; checkpoint cost.

    hpc-train bench task [--rounds N] [--epochs E] [--quick]

The task (hpc_train/bench/bench_task.py) is a user's module, not the MNIST
CNN: a dense classifier on generated data. Each contestant is its own
process, as a user would run it:

- the plain script (`python -m hpc_train.bench.plain_fit`): the task's own
  build_model() and train_dataset() repeated, `model.fit(dataset, epochs=E,
  steps_per_epoch=S)` with Keras' defaults; with oneDNN's kernels on (the
  trainer's default, so both run the same kernels: the baseline) and with
  TensorFlow's own default;
- `hpc-train train --task bench_task.py --set strategy=none`, defaults;
- the same, its checkpoint saves read from metrics.json (`checkpoint_saves`: the trainer times each save).

A round runs each once, in alternating order. A contestant's figure for a
round is the median training examples/s of its epochs after the first (the
trainer's from metrics.json, the plain script's from an epoch-timing
callback). The checkpoint cost is the time of the trainer's save calls against
the training time without them, per epoch after the first. Rewrites its
section of BENCHMARKS.md and benchmarks/task_throughput.png.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpc_train.bench.report import (HPC_TRAIN, ROOT, command_line, figure, interleaved, machine, median_bars, publish,
                                    pyplot, spread, summary, table)
from hpc_train.runs.metrics import read_metrics

PLOT = "task_throughput.png"
SPEED_GOAL = 1.0  # the trainer at least as fast as the plain script
CHECKPOINT_GOAL = 0.03  # saves at most 3% of the training time
TASK_FILE = Path(__file__).with_name("bench_task.py")
BATCH_SIZE = 64  # the trainer's default batch_size, which the plain script is given too
STEPS_PER_EPOCH = 256  # one pass over bench_task's 16,384 examples: the trainer's own epoch for this task
ONEDNN = "TF_ENABLE_ONEDNN_OPTS"
BASELINE = f"plain `model.fit`, {ONEDNN}=1 (baseline)"
PLAIN_DEFAULTS = "plain `model.fit`, TensorFlow's defaults"
ONE_PASS = " (one pass over the data: the trainer's own epoch for this task)"
TRAINER = "`hpc-train train --task` (defaults)"
TIMED = "`hpc-train train --task`, saves timed"


@dataclass(frozen=True)
class Contestant:
    program: str  # "plain" (plain_fit), "train" (hpc-train train) or "timed" (the same, its saves read)
    environment: tuple[tuple[str, str], ...] = ()


CONTESTANTS: dict[str, Contestant] = {
    BASELINE: Contestant("plain", ((ONEDNN, "1"),)),
    PLAIN_DEFAULTS: Contestant("plain"),
    TRAINER: Contestant("train"),
    TIMED: Contestant("timed"),
}


@dataclass(frozen=True)
class Run:
    """One run of one contestant: per epoch, examples/s, training seconds and (timed runs) save seconds."""

    rates: list[float]
    training_seconds: list[float]
    save_seconds: list[float]

    @property
    def steady_rate(self) -> float:
        """Median examples/s of the epochs after the first (which traces the step and the first save)."""
        return statistics.median(self.rates[1:] or self.rates)

    @property
    def steady_save_share(self) -> float:
        """Save time against training time over the epochs after the first, whose save traces the save function.

        The trainer's epoch times leave its saves out (the report runs before the save), and it saves only
        some epochs' ends (checkpoint_share), so this is the time all the later saves took against the
        training time of all the later epochs.
        """
        return sum(self.save_seconds[1:]) / sum(self.training_seconds[1:] or self.training_seconds)

    @property
    def rate_with_saves(self) -> float:
        """Examples/s over the epochs after the first, with the time of the saves among them counted in."""
        examples = sum(rate * seconds for rate, seconds in zip(self.rates[1:], self.training_seconds[1:]))
        return examples / (sum(self.training_seconds[1:]) + sum(self.save_seconds[1:]))


def one_run(contestant: Contestant, epochs: int, steps: int) -> Run:
    """Run a contestant once, in its own process, and read its per-epoch figures."""
    environment = {key: value for key, value in os.environ.items() if key != ONEDNN}  # each its own default
    environment.update(contestant.environment)
    environment["TF_CPP_MIN_LOG_LEVEL"] = "2"
    if contestant.program == "plain":
        command = [sys.executable, "-m", "hpc_train.bench.plain_fit", str(epochs), str(steps), "--batch-size",
                   str(BATCH_SIZE)]
        result = subprocess.run(command, capture_output=True, text=True, check=True, env=environment)
        figures = json.loads(result.stdout.strip().splitlines()[-1])
        return Run(figures["examples_per_second"], figures["seconds"], [])
    with tempfile.TemporaryDirectory(prefix="hpc-train-bench-") as output:
        settings = ["--task", str(TASK_FILE), "--output-dir", output, "--set", "strategy=none", "--set",
                    f"epochs={epochs}", "--set", f"batch_size={BATCH_SIZE}"]
        if steps != STEPS_PER_EPOCH:
            settings += ["--set", f"steps_per_epoch={steps}"]
        subprocess.run([HPC_TRAIN, "train", *settings], capture_output=True, text=True, check=True, env=environment)
        metrics = read_metrics(Path(output), strict=True)
        records = metrics["epochs"]
        # The trainer times every save itself (metrics.json's checkpoint_saves); the "timed" contestant reads them.
        timed = metrics["checkpoint_saves"] if contestant.program == "timed" else []
        return Run([record["images_per_second"] for record in records],
                   [record["training_seconds"] for record in records], [save["seconds"] for save in timed])


def measure(names: Sequence[str], rounds: int, epochs: int, steps: int,
            run: Callable[[Contestant, int, int], Run] = one_run) -> dict[str, list[Run]]:
    """Every contestant once per round, in alternating order; each run's figures, in round order."""
    runs: dict[str, list[Run]] = {name: [] for name in names}

    def contest(name: str) -> float:
        runs[name].append(run(CONTESTANTS[name], epochs, steps))
        return runs[name][-1].steady_rate

    interleaved({name: (lambda name=name: contest(name)) for name in names}, rounds, lambda rate: f"{rate:,.0f}")
    return runs


def ratios(runs: dict[str, list[Run]], name: str) -> list[float]:
    """Each round's steady examples/s of `name` against the baseline's in the same round."""
    return [run.steady_rate / base.steady_rate for run, base in zip(runs[name], runs[BASELINE])]


def with_saves_ratios(runs: dict[str, list[Run]]) -> list[float]:
    """Each round's timed trainer, its saves counted in, against the baseline's examples/s."""
    return [run.rate_with_saves / base.steady_rate for run, base in zip(runs[TIMED], runs[BASELINE])]


def verdicts(runs: dict[str, list[Run]]) -> tuple[float, float]:
    """(median trainer/baseline ratio with the saves counted in, median checkpoint share): what the goals are
    judged on."""
    return summary(with_saves_ratios(runs))[0], summary([run.steady_save_share for run in runs[TIMED]])[0]


def render(runs: dict[str, list[Run]], epochs: int, steps: int) -> str:
    rounds = len(runs[BASELINE])
    rows = [(name, *spread([run.steady_rate for run in values]), *spread(ratios(runs, name), 2))
            for name, values in runs.items()]
    timed = runs[TIMED]
    rows.append(("the saves-timed runs, their saves counted in", *spread([run.rate_with_saves for run in timed]),
                 *spread(with_saves_ratios(runs), 2)))
    speed, share = verdicts(runs)
    save_ms = [statistics.median(run.save_seconds[1:] or run.save_seconds) for run in timed]
    later_saves = [len(run.save_seconds) - 1 for run in timed]
    first_ms = [run.save_seconds[0] for run in timed]
    epoch_seconds = [statistics.median(run.training_seconds[1:] or run.training_seconds) for run in timed]
    break_even = summary(save_ms)[0] / CHECKPOINT_GOAL
    lines = [
        "## A user's task: `hpc-train train --task` against a plain `model.fit`, and the cost of checkpoints",
        "",
        f"Machine: {machine()}, CPU only. Command: `{command_line('task')}`: each contestant in its own process, "
        f"{rounds} rounds in alternating order; a round's figure is the median training examples/s of epochs "
        f"2-{epochs} (epoch 1 traces the step function and the first save). The task is "
        "`hpc_train/bench/bench_task.py`, written as a user would: a dense classifier (64 features, two hidden "
        "layers of 512, 10 classes; 300k weights, a 3.6 MB checkpoint with Adam's slots) on 16,384 generated "
        f"examples, batch {BATCH_SIZE}, {steps} steps per epoch{ONE_PASS if steps == STEPS_PER_EPOCH else ''}.",
        "",
        "The plain script (`python -m hpc_train.bench.plain_fit`) calls the same `build_model()` and the same "
        "`train_dataset()`, repeated, then `model.fit(dataset, epochs=E, steps_per_epoch=S)` with Keras' defaults "
        "(one step per call, the progress bar), no checkpoints. The trainer's examples/s (metrics.json) leave "
        "out its checkpoint saves, which are timed on their own (below); its other epoch-end work (metrics.json, "
        "TensorBoard) is in. The goal is judged on the saves-timed runs with their saves counted in.",
        "",
        f"Goals: the trainer at least {SPEED_GOAL:.1f}x the plain script on the same kernels (hpc-train adds no "
        f"overhead), saves counted in: **{speed:.2f}x, {'met' if speed >= SPEED_GOAL else 'missed'}**. Checkpoints "
        f"at the default interval at most {CHECKPOINT_GOAL:.0%} of the training time: **{share:.1%}, "
        f"{'met' if share <= CHECKPOINT_GOAL else 'missed'}**. The default interval is `checkpoint_share` 0.03: an "
        "epoch's end is saved once the last save's duration / 0.03 has passed since it; the first and the last "
        "epoch, and every stop, are always saved.",
        "",
        *table(("run", "examples/s, median", "min-max", "ratio to baseline, median", "min-max"), rows),
        "",
        "Checkpoint cost, measured in the saves-timed runs: the trainer's save (`StepSaver`, called by the "
        "epoch-end callback) wrapped in a clock. `CheckpointManager.save` is synchronous, so the wall-clock time "
        "of that call is all the training loop loses to it; a run with saving turned off would show the same "
        "figure as a difference of two noisy throughputs, several times larger than the effect.",
        "",
        *table(("after the first epoch", "median", "min-max"), [
            ("saves in a run (the last epoch's included)", *spread(later_saves, 0)),
            ("checkpoint save, ms", *spread(save_ms, 1, 1000)),
            ("epoch training time, s", *spread(epoch_seconds, 2)),
            ("save time / training time, %", *spread([run.steady_save_share for run in timed], 2, 100)),
            ("first save (epoch 1, traces the save), ms", *spread(first_ms, 1, 1000)),
        ]),
        "",
        f"A save costs the same whatever the epoch's length (it writes the weights and Adam's slots): saved after "
        f"every epoch, it would be {CHECKPOINT_GOAL:.0%} of an epoch of {break_even:.1f} s and "
        f"{summary(save_ms)[0] / 60:.1%} of a one-minute epoch. Epochs as short as this task's are therefore "
        "not all saved: a crash (not a stop, which always saves) loses at most the training since the last save, "
        "about a save's duration / 0.03.",
        "",
        "Where a save's time goes (cProfile of TensorFlow's own `CheckpointManager.save` on this model, outside "
        "the trainer: 20-40 ms a save): about half in the `SaveV2` op writing the file, the rest in Python, "
        "reading its 22 tensors one by one and serialising the object graph. TensorFlow's asynchronous "
        "checkpoints (`CheckpointOptions(experimental_enable_async_checkpoint=True)`) took as long per call "
        "here, so they would not help on a CPU; saving fewer epochs' ends does.",
        "",
        f"![examples/s per run, and checkpoint cost]({figure(PLOT).relative_to(ROOT)})",
    ]
    return "\n".join(lines)


def plot(runs: dict[str, list[Run]]) -> None:
    plt = pyplot()
    if plt is None:
        return
    names = list(runs)
    drawing, (speed, cost) = plt.subplots(1, 2, figsize=(10, 3.6), gridspec_kw={"width_ratios": [2.2, 1]})
    median_bars(speed, [[run.steady_rate for run in runs[name]] for name in names],
                [textwrap.fill(name.replace("`", ""), 30) for name in names],
                [name.startswith("`hpc-train") for name in names], (SPEED_GOAL, "goal: the baseline's"))
    speed.set(xlabel="training examples/s (median, min-max)", title="dense task, one process, batch 64")
    shares = [100 * run.steady_save_share for run in runs[TIMED]]
    cost.bar([0], [statistics.median(shares)], yerr=[[statistics.median(shares) - min(shares)],
                                                      [max(shares) - statistics.median(shares)]], color="tab:blue")
    cost.axhline(100 * CHECKPOINT_GOAL, color="red", linestyle=":", label=f"goal: {CHECKPOINT_GOAL:.0%}")
    cost.set_xticks([0], ["a save per epoch"])
    cost.set(ylabel="% of training time", title="checkpoint cost", xlim=(-1, 1),
             ylim=(0, 1.4 * max(*shares, 100 * CHECKPOINT_GOAL)))
    cost.legend(loc="upper right", framealpha=1.0)
    drawing.tight_layout()
    drawing.savefig(figure(PLOT), dpi=110)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hpc-train bench task", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--quick", action="store_true",
                        help="2 rounds of 2 short epochs, without the TensorFlow-defaults script; print only")
    args = parser.parse_args(argv)
    names = [name for name in CONTESTANTS if not (args.quick and name == PLAIN_DEFAULTS)]
    rounds, epochs, steps = (2, 2, 64) if args.quick else (args.rounds, args.epochs, STEPS_PER_EPOCH)
    runs = measure(names, rounds, epochs, steps)
    publish("task", render(runs, epochs, steps), not args.quick, lambda: plot(runs))
    speed, share = verdicts(runs)
    return 0 if speed >= SPEED_GOAL and share <= CHECKPOINT_GOAL else 1
