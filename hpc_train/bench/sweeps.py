"""Sweeps: 8 trials as one job array against 8 separate `hpc-train submit` calls; and pruning's saving.

    hpc-train bench sweeps [--trials 8] [--epochs E] [--repetitions N] [--quick]

On the Slurm SLURM_CONF names (`hpc-train cluster up` makes 4 nodes here),
each repetition runs, one after the other, the same trials (1-node MNIST
jobs, learning rates spread from 1e-5 to 1e-2):
- one sweep: `hpc-train submit --sweep learning_rate=...`, one sbatch;
- separate: one `hpc-train submit --set learning_rate=...` per trial;
- one sweep with `--prune halving`.
For each: the time to submit, the time until the last trial runs, and the wall
time until every trial has ended; for the pruned sweep, its best final
validation accuracy beside the unpruned sweep's. Rewrites its section of
BENCHMARKS.md.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hpc_train.bench.report import (HPC_TRAIN, command_line, machine, parsed, progress, publish, require_slurm, spread,
                                    table)
from hpc_train.errors import HpcTrainError
from hpc_train.slurm.client import SlurmClient
from hpc_train.slurm.follow import FINAL_STATES, parse_array_states
from hpc_train.runs import metrics

TIMEOUT = 1800.0
VARIANTS = ("one sweep (job array)", "separate submits", "one sweep, --prune halving")


@dataclass(frozen=True)
class Timing:
    submit: float  # seconds the submitting command(s) took
    last_running: float  # from the first submit until the last trial started
    wall: float  # from the first submit until every trial ended
    best: float | None  # the best final validation accuracy of the trials


def learning_rates(trials: int) -> list[float]:
    """Spread evenly on a log scale from 1e-5 to 1e-2 (pure)."""
    return [round(10 ** (-5 + 3 * index / max(1, trials - 1)), 8) for index in range(trials)]


def _submit(args: Sequence[str], cwd: Path, env: dict[str, str]) -> str:
    result = subprocess.run([HPC_TRAIN, "submit", *args], cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=300)
    if result.returncode != 0:
        raise HpcTrainError(f"hpc-train submit failed: {result.stderr.strip().splitlines()[-1:]}")
    return result.stdout.splitlines()[0].strip()


def _states(jobs: list[str], slurm: SlurmClient) -> list[str]:
    """Every trial's state: the elements of an array (one id), or each job."""
    if len(jobs) == 1 and "_" not in jobs[0]:
        array = jobs[0]
        found = parse_array_states(slurm.array_states(array), array)
        if found:
            return list(found.values())
    return list(slurm.queued_states(jobs).values())


def _best(folders: list[Path]) -> float | None:
    finals = []
    for folder in folders:
        epochs = metrics.epochs(folder)
        if epochs and "val_accuracy" in epochs[-1]:
            finals.append(epochs[-1]["val_accuracy"])
    return max(finals) if finals else None


def run_variant(variant: str, rates: list[float], epochs: int, data: Path, env: dict[str, str]) -> Timing:
    slurm = SlurmClient.local(env)
    with tempfile.TemporaryDirectory(prefix="hpc-train-bench-sweeps-") as folder:
        workdir = Path(folder)
        # A node each (the local cluster's nodes have 4 CPUs): 4 trials at once, the others wait, as on a busy
        # cluster; a pruned trial gives its node to a waiting one.
        common = ["--nodes", "1", "--cpus-per-task", "4", "--name", "bs", "--set", f"epochs={epochs}",
                  "--set", f"data_dir={data}", "--set", "train_images=2000"]
        started = time.monotonic()
        if variant == VARIANTS[1]:
            jobs = [_submit([*common, "--set", f"learning_rate={rate}"], workdir, env) for rate in rates]
        else:
            sweep = ["--sweep", "learning_rate=" + ",".join(map(str, rates))]
            jobs = [_submit([*common, *sweep, *(["--prune", "halving"] if variant == VARIANTS[2] else [])],
                            workdir, env)]
        submitted = time.monotonic() - started
        last_running = None
        while True:
            states = _states(jobs, slurm)
            if last_running is None and len(states) == len(rates) and "PENDING" not in states:
                last_running = time.monotonic() - started
            if len(states) == len(rates) and all(state in FINAL_STATES for state in states):
                break
            if time.monotonic() - started > TIMEOUT:
                slurm.cancel(jobs)
                raise HpcTrainError(f"the {variant} did not end within {TIMEOUT:.0f} s")
            time.sleep(0.2)
        wall = time.monotonic() - started
        return Timing(submitted, last_running or wall, wall, _best(sorted(workdir.glob("runs/bs-*"))))


def measure(repetitions: int, trials: int, epochs: int, data: Path) -> dict[str, list[Timing]]:
    env = dict(os.environ)
    rates = learning_rates(trials)
    results: dict[str, list[Timing]] = {variant: [] for variant in VARIANTS}
    for repetition in range(repetitions):
        for variant in VARIANTS if repetition % 2 == 0 else tuple(reversed(VARIANTS)):
            results[variant].append(run_variant(variant, rates, epochs, data, env))
            timing = results[variant][-1]
            progress(f"repetition {repetition + 1}/{repetitions}, {variant}: submit {timing.submit:.2f} s, last "
                     f"running at {timing.last_running:.1f} s, all done at {timing.wall:.1f} s, best "
                     f"{timing.best}")
    return results


def render(results: dict[str, list[Timing]], trials: int, epochs: int) -> str:
    rows = []
    for variant in VARIANTS:
        timings = results[variant]
        bests = [timing.best for timing in timings if timing.best is not None]
        rows.append((variant, *spread([t.submit for t in timings], 2), *spread([t.last_running for t in timings], 1),
                     *spread([t.wall for t in timings], 1), f"{statistics.median(bests):.4f}" if bests else "-"))
    header = ("trials submitted as", "submit, s", "min-max", "last trial running, s", "min-max", "all ended, s",
              "min-max", "best val_accuracy")
    sweep_wall = statistics.median(t.wall for t in results[VARIANTS[0]])
    pruned_wall = statistics.median(t.wall for t in results[VARIANTS[2]])
    return "\n".join([
        "## Sweeps: one job array against separate submits, and pruning",
        "",
        f"Machine: {machine()}; Slurm: the local cluster (`hpc-train cluster up`, 4 nodes on this machine). "
        f"Command: `{command_line('sweeps')}`: {len(results[VARIANTS[0]])} repetition(s) of {trials} trials, "
        f"1-node MNIST jobs (a node each) of {epochs} epochs on 2,000 images, learning rates from 1e-5 to 1e-2 on a "
        "log scale; "
        "the variants in alternating order.",
        "",
        *table(header, rows),
        "",
        f"Pruning (successive halving at epochs 1, 2, 4, ...) ended the sweep in {pruned_wall / sweep_wall:.0%} of "
        "the unpruned sweep's wall time; the best trial is never pruned by one that is worse, so the best accuracy "
        "stays. One sbatch submits the whole array, where separate submits pay a Python start and a submission "
        "each; after that, when the last trial starts and when all end is the scheduler's and the training's, and "
        "differs here by run-to-run noise (one repetition: measure more with --repetitions N). Each trial takes a "
        "whole node (4 CPUs), so 4 run at once and the others wait: what pruning frees is a node for a waiting "
        "trial.",
    ])


def main(argv: Sequence[str] | None = None) -> int:
    args = parsed("sweeps", __doc__, argv, repetitions=1, data_dir=True, trials=8, epochs=6)
    if not require_slurm("sweeps"):
        return 2
    results = measure(1 if args.quick else args.repetitions, args.trials, args.epochs, args.data_dir)
    publish("sweeps", render(results, args.trials, args.epochs), not args.quick)
    return 0
