"""The scaling benchmark's section of BENCHMARKS.md."""

from __future__ import annotations

from collections.abc import Sequence

from hpc_train.bench import projection
from hpc_train.bench.report import ROOT, command_line, figure, machine, table
from hpc_train.bench.scaling.analysis import findings, scaling_rows, strategy_rows
from hpc_train.bench.scaling.runs import (
    DEFAULT_REPETITIONS,
    EPOCHS,
    GOAL,
    GRADIENT_BYTES,
    IMAGES_PER_EPOCH,
    STRATEGY_BATCHES,
    WARMUP_EPOCHS,
    Result,
    Run,
)


def reproducing_command(repetitions: int) -> str:
    """The command that measures what the report shows: its repetitions named unless they are the default."""
    return command_line("scaling", *(() if repetitions == DEFAULT_REPETITIONS else ("--repetitions", str(repetitions))))


def render(results: dict[Run, list[Result]], batches: Sequence[int], repetitions: int, link: projection.Link,
           compute: projection.ComputeModel | None, model_checks: Sequence[projection.Check]) -> str:
    strategy_batches = [batch for batch in STRATEGY_BATCHES if batch in batches]
    lines = [
        "## Scaling on Slurm: 1 and 2 workers, multiworker and parameter_server",
        "",
        f"Machine: {machine()}; Slurm: the local cluster (`hpc-train cluster up`), one task per node, each task bound "
        f"to one core (`taskset`). Command: `{reproducing_command(repetitions)}`: {repetitions} repetitions, jobs in "
        f"alternating order; a job's figure is the median global training images/s of epochs "
        f"{WARMUP_EPOCHS + 1}-{EPOCHS} (metrics.json), {IMAGES_PER_EPOCH:,} images per worker and epoch; learning "
        "rate 0.001 x sqrt(global batch / 64). The first two epochs are warm-up: the first traces the step "
        "function, and two workers' second epoch still ran about 10% below their steady speed.",
        "",
        f"### Weak scaling, multiworker (goal: {GOAL:.0%} efficiency)",
        "",
        *table(("batch per worker", "1 worker, images/s", "min-max", "2 workers, images/s", "min-max",
                "efficiency", "min-max", "ceiling", "min-max", "accuracy, 2 workers"), scaling_rows(results, batches)),
        "",
        "Ceiling: two independent one-worker trainings at once, one per core, no traffic between them, against "
        "twice one alone; the two cores share caches and memory bandwidth, so no 2-worker run here can beat it.",
        "",
        f"![images/s against workers, and ideal]({figure('scaling.png').relative_to(ROOT)})",
        "",
        "### multiworker against parameter_server, 2 workers",
        "",
        "parameter_server runs a chief (the coordinator) and one ps beside the two workers, on the same two cores.",
        "",
        *table(("batch per worker", "run", "images/s", "min-max"), strategy_rows(results, strategy_batches), "llrr"),
        "",
        f"![images/s per strategy]({figure('strategies.png').relative_to(ROOT)})",
        "",
        *findings(results, batches, link),
        "",
        *(_projection(compute, link, model_checks, batches) if compute else [
            f"No projection: it fits a line through the step times at two batches or more, and this run measured "
            f"one ({batches[0]}); measure two or more (e.g. `--batches 256,1024`) for it."]),
    ]
    return "\n".join(lines)


def _projection(compute: projection.ComputeModel, link: projection.Link, model_checks: Sequence[projection.Check],
                batches: Sequence[int]) -> list[str]:
    return [
        projection.render(compute, GRADIENT_BYTES, link, model_checks, batches),
        "",
        f"![projected efficiency against GPUs]({figure('projection.png').relative_to(ROOT)})",
        "",
        "Reading the projection: on the measured core (speedup 1) this small model scales to hundreds of workers "
        "over InfiniBand and, at 256 images per worker or more, to about a hundred over 25 GbE. On accelerators "
        "the same gradient must cross the network in a fiftieth of the time, so the 90% point moves to a few "
        "workers unless the "
        "per-worker batch grows with the accelerator's speed; the measured 2-worker steps also took longer than "
        "the model says (above), so read the projection as an upper bound.",
    ]
