"""Weak scaling on Slurm: 1 and 2 workers, multiworker against parameter_server, and a projection to 512 GPUs.

    hpc-train bench scaling [--repetitions N] [--batches 64,256,1024,2048] [--quick]

Runs real jobs on the Slurm that SLURM_CONF names (`hpc-train cluster up` makes
one here), each task bound to one core (`taskset`), one task per node:
- for each per-worker batch, one job with 1 worker and one with 2 (multiworker),
  in alternating order; global images/s is the median of a job's epochs after
  the first two, its warm-up (metrics.json), efficiency = 2 workers' images/s / (2 x 1 worker's);
- at 2 workers, parameter_server (chief, one ps, two workers) at batches 64 and 256;
- one all-reduce job (`python -m hpc_train.bench.allreduce`) that fits the local
  link's latency and bandwidth for the cost model in `projection.py`.
The learning rate grows with the square root of the global batch (Adam), so
larger batches still learn; each row reports its final validation accuracy.
Rewrites its section of BENCHMARKS.md, benchmarks/scaling.png,
benchmarks/strategies.png and benchmarks/projection.png. The raw measurements
are kept (--results), so `--report-only` can rewrite the report without rerunning.

The package, by concern: `runs` (what is measured, and the saved measurements),
`driver` (the jobs on Slurm), `analysis` (figures from measurements), `plots`,
`section` (the BENCHMARKS.md text); this module is the command.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from hpc_train.bench import projection
from hpc_train.bench.report import DEFAULT_DATA, figure, progress, publish, require_slurm, summary
from hpc_train.bench.scaling.analysis import checks, compute_model, efficiencies
from hpc_train.bench.scaling.driver import allreduce_link, measure
from hpc_train.bench.scaling.plots import plot_scaling, plot_strategies
from hpc_train.bench.scaling.runs import (
    BATCHES,
    DEFAULT_REPETITIONS,
    GOAL,
    GRADIENT_BYTES,
    STRATEGY_BATCHES,
    Measured,
    load,
    save,
)
from hpc_train.bench.scaling.section import render
from hpc_train.errors import HpcTrainError


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hpc-train bench scaling", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--repetitions", type=int, default=DEFAULT_REPETITIONS)
    parser.add_argument("--batches", default=",".join(map(str, BATCHES)), help="per-worker batches, comma-separated")
    parser.add_argument("--quick", action="store_true", help="1 repetition at batches 64 and 256; print only")
    parser.add_argument("--results", type=Path, default=Path(tempfile.gettempdir()) / "hpc-train-bench-scaling.json",
                        help="where the raw measurements go (default: %(default)s)")
    parser.add_argument("--report-only", action="store_true", help="rewrite the report from --results; run nothing")
    args = parser.parse_args(argv)
    args.batches = parse_batches(args.batches)  # before any job: a typo must not cost minutes of measuring
    if args.report_only:
        measured = load(args.results)
    elif not require_slurm("scaling"):
        return 2
    else:
        measured = measure_all(args)
        save(measured, args.results)
        progress(f"raw measurements in {args.results} (--report-only rewrites the report from them)")
    return report(measured, write=not args.quick)


def parse_batches(text: str) -> tuple[int, ...]:
    """`--batches 64,256`: distinct per-worker batches, smallest first; refused in one line when malformed."""
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdigit() and int(part) >= 1 for part in parts):
        raise HpcTrainError(f"--batches {text!r}: expected per-worker batches, whole numbers of 1 or more separated "
                            "by commas (e.g. 64,256,1024)")
    return tuple(sorted({int(part) for part in parts}))


def measure_all(args: argparse.Namespace) -> Measured:
    batches = (64, 256) if args.quick else args.batches
    repetitions = 1 if args.quick else args.repetitions
    progress("all-reduce times between two tasks")
    allreduce = allreduce_link(os.cpu_count() or 1)
    return Measured(batches, repetitions, allreduce, measure(args.data_dir, batches, repetitions))


def report(measured: Measured, write: bool) -> int:
    batches, results = measured.batches, measured.results
    allreduce = measured.allreduce
    link = projection.fit_link("this machine, loopback gRPC", allreduce["sizes"], allreduce["seconds"],
                               allreduce["workers"])
    # The compute model is a line through the step times: one batch measures scaling but cannot fit it.
    compute = compute_model(results, batches) if len(batches) >= 2 else None
    model_checks = checks(results, batches, compute, link) if compute else []
    section = render(results, batches, measured.repetitions, link, compute, model_checks)
    plots = [lambda: plot_scaling(results, batches),
             lambda: plot_strategies(results, [batch for batch in STRATEGY_BATCHES if batch in batches])]
    if compute:
        plots.append(lambda: projection.plot(figure("projection.png"), compute, GRADIENT_BYTES, batches))
    publish("scaling", section, write, *plots)
    best = max(summary(efficiencies(results, batch))[0] for batch in batches)
    return 0 if best >= GOAL else 1
