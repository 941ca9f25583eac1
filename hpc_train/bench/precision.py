"""float32 against the default `precision: auto`, side by side: the trainer's images/s and its final accuracy.

    hpc-train bench precision [--rounds N] [--epochs E] [--data-dir DIR] [--quick]

A round trains the default CNN twice, each in its own process, in alternating
order: once with `precision=float32` and once with the defaults, both with the
round's seed (round 1: seed 0, ...), so every seed is measured both ways. A
run's speed is the median training images/s of its epochs after the first; its
accuracy is the last epoch's val_accuracy. Rewrites its section of BENCHMARKS.md.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpc_train.bench.report import command_line, machine, progress, publish, spread, table
from hpc_train.bench.trainer import Contestant, parse_options, train_metrics

FLOAT32 = "hpc-train train, precision=float32"
AUTO = "hpc-train train (defaults: precision auto)"
CONTESTANTS = {FLOAT32: Contestant("train", ("precision=float32",)), AUTO: Contestant("train")}
# Issue 32: auto's accuracy at most 0.3 points below float32's.
ACCURACY_POINTS = 0.3


@dataclass(frozen=True)
class Run:
    images_per_second: float
    accuracy: float
    precision: str  # what was chosen and why, from metrics.json


def one_run(contestant: Contestant, data_dir: Path, epochs: int, seed: int) -> Run:
    options = (*contestant.options, f"seed={seed}")
    metrics = train_metrics(Contestant(contestant.program, options, contestant.environment), data_dir, epochs)
    epochs_run = metrics["epochs"]
    chosen = metrics["precision"]
    return Run(statistics.median(epoch["images_per_second"] for epoch in epochs_run[1:]),
               epochs_run[-1]["val_accuracy"], f"{chosen['policy']} ({chosen['why']})")


def measure(data_dir: Path, rounds: int, epochs: int,
            run: Callable[[Contestant, Path, int, int], Run] = one_run) -> dict[str, list[Run]]:
    """Each contestant once per round with the round's seed, the order reversed every other round."""
    samples: dict[str, list[Run]] = {name: [] for name in CONTESTANTS}
    for seed in range(rounds):
        for name in list(CONTESTANTS) if seed % 2 == 0 else list(reversed(CONTESTANTS)):
            samples[name].append(run(CONTESTANTS[name], data_dir, epochs, seed))
        progress(f"round {seed + 1}/{rounds}: " + ", ".join(
            f"{runs[-1].images_per_second:,.0f} images/s, {runs[-1].accuracy:.4f}" for runs in samples.values()))
    return samples


def accuracy_gap(samples: dict[str, list[Run]]) -> float:
    """auto's mean final accuracy minus float32's, in points (percent)."""
    return 100 * (statistics.mean(r.accuracy for r in samples[AUTO]) -
                  statistics.mean(r.accuracy for r in samples[FLOAT32]))


def render(samples: dict[str, list[Run]], epochs: int) -> str:
    base = [run.images_per_second for run in samples[FLOAT32]]
    rows = []
    for name, runs in samples.items():
        rates = [run.images_per_second for run in runs]
        accuracies = [run.accuracy for run in runs]
        rows.append((name, runs[0].precision, *spread(rates), *spread([r / b for r, b in zip(rates, base)], 2),
                     f"{statistics.mean(accuracies):.4f}", spread(accuracies, 4)[1]))
    rounds = len(base)
    return "\n".join([
        "## Precision: float32 against auto",
        "",
        f"Machine: {machine()}, CPU only. Command: "
        f"`{command_line('precision', '--rounds', str(rounds), '--epochs', str(epochs))}`: "
        f"{rounds} rounds, each training the default CNN (the 8,000 training images of the staged MNIST test set, "
        f"batch 64) for {epochs} epochs once with `precision=float32` and once with the defaults, in alternating "
        f"order, each in its own process, both with the round's seed (0 to {rounds - 1}). Speed: a run's median "
        f"training images/s of epochs 2-{epochs}, then the median over rounds; accuracy: the last epoch's "
        "val_accuracy (2,000 held-out images), mean and min-max over the seeds.",
        "",
        *table(("run", "precision chosen", "images/s, median", "min-max", "ratio to float32, median", "min-max",
                "val_accuracy, mean", "min-max"), rows, "llrrrrrr"),
        "",
        f"auto's accuracy minus float32's: {accuracy_gap(samples):+.2f} points (goal: within {ACCURACY_POINTS}).",
    ])


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options("precision", __doc__, argv)
    samples = measure(options.data_dir, options.rounds, options.epochs)
    publish("precision", render(samples, options.epochs), options.write)
    return 0 if accuracy_gap(samples) >= -ACCURACY_POINTS else 1  # better than float32 is no failure
