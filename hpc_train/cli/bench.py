"""Measure hpc-train against its baselines and write the figures into BENCHMARKS.md and benchmarks/*.png.

    hpc-train bench trainer      # trainer vs a plain Keras script of the seed design, one worker
    hpc-train bench precision    # float32 vs the default precision auto: images/s and accuracy over seeds
    hpc-train bench task         # a user's task module under hpc-train train vs a plain model.fit;
                                 # the cost of a checkpoint every epoch
    hpc-train bench startup      # task start to first training step vs a bare `import tensorflow`
    hpc-train bench scaling      # 1 vs 2 workers on the local Slurm, multiworker vs parameter_server,
                                 # an all-reduce model and its projection to 512 GPUs
    hpc-train bench bootstrap    # layout from 1 to 32,768 tasks; CLI start vs `python -c pass`
    hpc-train bench submit       # submit -> running vs a raw sbatch, on the Slurm SLURM_CONF names
    hpc-train bench faults       # a task killed at a random step, healed by a retry, vs the run uninterrupted
    hpc-train bench sweeps       # 8 trials as one job array vs 8 submits; the wall time --prune halving saves
    hpc-train bench tracking     # epochs with and without --track mlflow, against a local mlflow server
    hpc-train bench search       # grid, random and TPE at an equal budget of trials, with and without pruning
    hpc-train bench all          # each of the above in turn
    hpc-train bench NAME --help  # its options (repetitions, --quick)

Each compares side by side in one run, repeating and reporting medians with
min-max. `scaling`, `submit`, `faults` and `sweeps` need Slurm (`hpc-train cluster up`).
"""

from __future__ import annotations

import argparse

BENCHMARKS = ("trainer", "precision", "task", "startup", "scaling", "bootstrap", "submit", "faults", "sweeps",
              "tracking", "search")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("benchmark", choices=(*BENCHMARKS, "all"))
    parser.add_argument("options", nargs=argparse.REMAINDER, help="the benchmark's own options")


def run(args: argparse.Namespace) -> int:
    import importlib

    names = BENCHMARKS if args.benchmark == "all" else (args.benchmark,)
    codes = [importlib.import_module(f"hpc_train.bench.{name}").main(args.options) for name in names]
    return max(codes)
