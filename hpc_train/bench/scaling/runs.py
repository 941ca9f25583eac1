"""What the scaling benchmark measures: its runs, their results, and the saved measurements (pure)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hpc_train.bench import projection
from hpc_train.errors import HpcTrainError

BATCHES = (64, 256, 1024, 2048)


STRATEGY_BATCHES = (64, 256)


INDEPENDENT = "independent"


IMAGES_PER_EPOCH = 16384  # per worker: a few seconds of work per epoch at any batch


EPOCHS = 6


# Epochs left out of a job's figure: the first traces the step function; two workers reach their steady
# speed about 16 steps later still (their second epoch ran about 10% slower at 2,048 images per worker).
WARMUP_EPOCHS = 2


GOAL = 0.90


GRADIENT_BYTES = projection.DEFAULT_GRADIENT_BYTES


DEFAULT_REPETITIONS = 3


@dataclass(frozen=True)
class Run:
    strategy: str  # multiworker, parameter_server, or independent: one-worker trainings side by side, no traffic
    workers: int
    batch: int  # per worker

    @property
    def tasks(self) -> int:
        return self.workers + 2 if self.strategy == "parameter_server" else self.workers  # + chief and one ps

    @property
    def learning_rate(self) -> float:
        return 0.001 * math.sqrt(self.workers * self.batch / 64)

    @property
    def steps_per_epoch(self) -> int:
        return max(1, IMAGES_PER_EPOCH // self.batch)


@dataclass(frozen=True)
class Result:
    images_per_second: float
    accuracy: float


@dataclass(frozen=True)
class Measured:
    batches: tuple[int, ...]
    repetitions: int
    allreduce: dict
    results: dict[Run, list[Result]]


def plan(batches: Sequence[int], repetition: int) -> list[Run]:
    """One repetition's jobs; the order flips every repetition so drift hits all runs alike."""
    runs = [Run(strategy, workers, batch) for batch in batches
            for strategy, workers in (("multiworker", 1), ("multiworker", 2), (INDEPENDENT, 2))]
    runs += [Run("parameter_server", 2, batch) for batch in STRATEGY_BATCHES if batch in batches]
    return runs if repetition % 2 == 0 else runs[::-1]


def save(measured: Measured, path: Path) -> None:
    runs = [{"run": vars(run), "results": [vars(result) for result in results]}
            for run, results in measured.results.items()]
    path.write_text(json.dumps({"batches": measured.batches, "repetitions": measured.repetitions,
                                "allreduce": measured.allreduce, "runs": runs}, indent=1))


def load(path: Path) -> Measured:
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise HpcTrainError(f"cannot read measurements from {path} ({error}); run `hpc-train bench scaling` first, "
                            "or pass --results FILE") from None
    results = {Run(**entry["run"]): [Result(**result) for result in entry["results"]] for entry in raw["runs"]}
    return Measured(tuple(raw["batches"]), raw["repetitions"], raw["allreduce"], results)
