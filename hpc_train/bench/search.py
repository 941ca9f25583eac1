"""Search: grid, random and TPE at an equal budget of trials on MNIST, each with and without pruning.

    hpc-train bench search [--trials 27] [--epochs 3] [--repetitions 3] [--quick]

Three hyperparameters: learning_rate (a log range), batch_size (a choice) and the hidden layer's width (an integer
range); a grid of 3 x 3 x 3 values at the same budget. Each trial trains a one-hidden-layer network in this
process (NumPy, plain SGD: a small model, so that 6 searches x 3 seeds fit in minutes of CPU), reporting its
validation accuracy at every epoch to an Optuna study whose sampler and pruner are the job's own
(runs/study.py's `sampler` and `pruner`; a grid's elements are its values in order, as a grid sweep's). Per
search and seed: the best accuracy reached, the trials it took to come within 0.2 points of it, and the epochs
trained (what pruning saves). Medians over the seeds; the plot shows the median best
accuracy so far against the trials run.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hpc_train.bench.report import command_line, figure, opening, parsed, progress, publish, pyplot, table
from hpc_train.runs import study as studies

SPACE = {"learning_rate": {"low": 1e-3, "high": 1.0, "log": True, "int": False},
         "batch_size": {"choices": [32, 128, 512]}, "width": {"low": 8, "high": 128, "log": False, "int": True}}
GRID = {"learning_rate": [0.01, 0.1, 1.0], "batch_size": [32, 128, 512], "width": [8, 32, 128]}
SEARCHES = ("grid", "random", "tpe")
WITHIN = 0.002  # 0.2 points of accuracy


@dataclass(frozen=True)
class Outcome:
    """One search with one seed: each trial's final accuracy (None: pruned) and best so far, epochs trained."""

    finals: tuple[float | None, ...]
    best_so_far: tuple[float, ...]
    epochs: int


def images(data_dir: Path, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The first `count` images for training, 2,000 held out for validation, as flat floats."""
    from hpc_train.tasks.mnist.data import load_mnist

    splits = load_mnist(data_dir, train_images=count, validation_images=2000)
    flat = [part.reshape(len(part), -1).astype(np.float32) / 255.0
            for part in (splits.train_images, splits.validation_images)]
    return flat[0], splits.train_labels.astype(np.int64), flat[1], splits.validation_labels.astype(np.int64)


def train(data: tuple[np.ndarray, ...], values: dict[str, Any], epochs: int, seed: int, report: Any) -> float | None:
    """A 784-width-10 ReLU network by SGD; `report(epoch, accuracy)` True stops it (pruned: None)."""
    x, y, vx, vy = data
    rng = np.random.default_rng(seed)
    width, rate, batch = int(values["width"]), float(values["learning_rate"]), int(values["batch_size"])
    w1 = rng.normal(0, np.sqrt(2 / 784), (784, width)).astype(np.float32)
    w2 = rng.normal(0, np.sqrt(1 / width), (width, 10)).astype(np.float32)
    b1, b2 = np.zeros(width, np.float32), np.zeros(10, np.float32)
    accuracy = 0.0
    for epoch in range(1, epochs + 1):
        order = rng.permutation(len(x))
        for start in range(0, len(x), batch):
            index = order[start:start + batch]
            hidden = np.maximum(x[index] @ w1 + b1, 0)
            logits = hidden @ w2 + b2
            probabilities = np.exp(logits - logits.max(1, keepdims=True))
            probabilities /= probabilities.sum(1, keepdims=True)
            probabilities[np.arange(len(index)), y[index]] -= 1
            grad = probabilities / len(index)
            grad_hidden = (grad @ w2.T) * (hidden > 0)
            w2 -= rate * hidden.T @ grad
            b2 -= rate * grad.sum(0)
            w1 -= rate * x[index].T @ grad_hidden
            b1 -= rate * grad_hidden.sum(0)
        logits = np.maximum(vx @ w1 + b1, 0) @ w2 + b2
        accuracy = float(np.mean(np.argmax(np.nan_to_num(logits, nan=-np.inf), 1) == vy))
        if epoch < epochs and report(epoch, accuracy):
            return None
    return accuracy


def search(kind: str, prune: str, trials: int, epochs: int, seed: int, data: tuple[np.ndarray, ...]) -> Outcome:
    """One search: `trials` trials asked of a study with the job's sampler and pruner."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    store = optuna.storages.InMemoryStorage()
    study = optuna.create_study(storage=store, direction="maximize", sampler=studies.sampler(kind, SPACE, seed),
                                pruner=studies.pruner(prune, epochs))
    grid = [dict(zip(GRID, values)) for values in itertools.product(*GRID.values())]
    axes = studies.distributions({key: {"choices": values} for key, values in GRID.items()})
    finals: list[float | None] = []
    spent = [0]
    for number in range(trials):
        trial = (studies.ask_fixed(study, store, grid[number % len(grid)], axes) if kind == "grid" else
                 study.ask(studies.distributions(SPACE)))
        values = grid[number % len(grid)] if kind == "grid" else dict(trial.params)

        def report(epoch: int, value: float, trial: Any = trial) -> bool:
            spent[0] += 1
            trial.report(value, epoch)
            return trial.should_prune()

        final = train(data, values, epochs, seed * 1000 + number, report)
        spent[0] += 1 if final is not None else 0
        study.tell(trial, final) if final is not None else study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        finals.append(final)
    best = list(itertools.accumulate((value or 0.0 for value in finals), max))
    return Outcome(tuple(finals), tuple(best), spent[0])


def within(outcome: Outcome) -> int:
    """The trials it took to come within 0.2 points of the best it reached."""
    best = max(outcome.best_so_far)
    return next(number + 1 for number, value in enumerate(outcome.best_so_far) if value >= best - WITHIN)


def measure(trials: int, epochs: int, seeds: int, data_dir: Path) -> tuple[dict[str, list[Outcome]], float]:
    data = images(data_dir, 8000)
    results: dict[str, list[Outcome]] = {}
    started = time.process_time()
    for kind, prune in itertools.product(SEARCHES, ("none", "halving")):
        name = kind if prune == "none" else f"{kind} + halving"
        results[name] = [search(kind, prune, trials, epochs, seed, data) for seed in range(seeds)]
        progress(f"{name}: best {[round(max(o.best_so_far), 4) for o in results[name]]}")
    return results, time.process_time() - started


def render(results: dict[str, list[Outcome]], trials: int, epochs: int, cpu: float) -> str:
    rows = []
    for name, outcomes in results.items():
        bests = [100 * max(outcome.best_so_far) for outcome in outcomes]
        rows.append((name, f"{statistics.median(bests):.2f}", f"{min(bests):.2f}-{max(bests):.2f}",
                     f"{statistics.median(within(outcome) for outcome in outcomes):g}",
                     f"{statistics.median(o.epochs for o in outcomes):g} of {trials * epochs}"))
    header = ("search", "best val accuracy, %", "min-max", "trials to within 0.2 points of it", "epochs trained")
    return "\n".join([
        *opening("Search: grid, random and TPE at an equal budget, with and without pruning",
                 f". Command: `{command_line('search')}`: {trials} trials per search, {epochs} epochs each, medians "
                 f"over {len(next(iter(results.values())))} seeds; {cpu:.0f} s of CPU in all. MNIST: the first 8,000 "
                 "of the staged images to train, 2,000 held out; a 784-W-10 ReLU network by plain SGD, trained in "
                 "this process (NumPy), its validation accuracy reported to an Optuna study at every epoch; the "
                 "study's sampler and pruner are the job's (runs/study.py). Three hyperparameters: learning_rate "
                 "1e-3..1 (log), batch_size one of 32, 128, 512, width W 8..128; the grid: learning_rate 0.01, 0.1, "
                 "1, batch_size 32, 128, 512, width 8, 32, 128 (27 combinations, in order). TPE's first 10 trials "
                 "are random draws (Optuna's n_startup_trials), the same as the random search's with the same seed; "
                 "pruning: `halving`, successive halving at epochs 1 and 2."),
        "",
        *table(header, rows),
        "",
        "![best accuracy so far against trials](benchmarks/search.png)",
    ])


def plot(results: dict[str, list[Outcome]], path: Path) -> None:
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, outcomes in results.items():
        curve = [statistics.median(o.best_so_far[number] for o in outcomes) for number in range(len(outcomes[0]
                                                                                                   .best_so_far))]
        ax.plot(range(1, len(curve) + 1), [100 * value for value in curve], label=name,
                linestyle="--" if "halving" in name else "-")
    ax.set_xlabel("trials run")
    ax.set_ylabel("best validation accuracy so far, % (median of seeds)")
    ax.legend()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    args = parsed("search", __doc__, argv, repetitions=3, data_dir=True, trials=27, epochs=3)
    seeds = 1 if args.quick else args.repetitions
    results, cpu = measure(args.trials, args.epochs, seeds, args.data_dir)
    publish("search", render(results, args.trials, args.epochs, cpu), not args.quick,
            lambda: plot(results, figure("search.png")))
    return 0
