"""What tracking a run in MLflow costs its training: epochs with and without `--track mlflow`, side by side.

    hpc-train bench tracking [--repetitions N] [--epochs E] [--quick]

Starts a local `mlflow server` (an SQLite store in a temporary folder, as a site's server would be) and runs
the bench task (bench_task.py) under `hpc-train train`, untracked and tracked, interleaved, each in its own
process. Tracked, the chief's own thread logs each epoch: the path of `train --track mlflow` by hand, where the
logging shares the training process (a job's body logs from a process of its own: cheaper still for the ranks).
Figures: each run's median epoch training seconds (epochs 2..E, from metrics.json), and one epoch's logging
(tracking/mlflow_run.log_epochs against the same server) timed apart, against an epoch. Goal: under 1%.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hpc_train.bench.report import (HPC_TRAIN, command_line, interleaved, machine, parsed, progress, publish, spread,
                                    summary, table)
from hpc_train.bench.task import STEPS_PER_EPOCH, TASK_FILE
from hpc_train.runs.metrics import read_metrics, write_metrics

GOAL = 0.01  # tracking at most 1% of the epoch time
UNTRACKED, TRACKED = "untracked", "`--track mlflow`"


def epoch_seconds(uri: str | None, epochs: int) -> float:
    """One run of the bench task; the median training seconds of its epochs after the first."""
    with tempfile.TemporaryDirectory(prefix="hpc-train-bench-") as output:
        settings = ["--task", str(TASK_FILE), "--output-dir", output, "--set", "strategy=none", "--set",
                    f"epochs={epochs}", *(("--track", "mlflow", "--tracking-uri", uri) if uri else ())]
        environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
        subprocess.run([HPC_TRAIN, "train", *settings], capture_output=True, text=True, check=True, env=environment)
        return statistics.median(epoch["training_seconds"] for epoch in read_metrics(Path(output))["epochs"][1:])


def logging_seconds(uri: str, epochs: int, repetitions: int) -> list[float]:
    """Seconds one epoch's logging takes (the body's work when metrics.json gains an epoch), timed apart."""
    from hpc_train.tracking.mlflow_run import client, log_epochs, open_run
    from hpc_train.tracking.settings import TrackSettings

    settings = TrackSettings(uri, "bench-tracking")
    mlflow, samples = client(settings), []
    figures = {"loss": 0.5, "accuracy": 0.8, "val_loss": 0.6, "val_accuracy": 0.79, "images_per_second": 15000.0,
               "seconds": 1.1, "training_seconds": 1.0}
    for _ in range(repetitions):
        with tempfile.TemporaryDirectory(prefix="hpc-train-bench-") as folder:
            run_id = open_run(mlflow, settings, Path(folder), "bench", {}, {"epochs": str(epochs)})
            for epoch in range(1, epochs + 1):
                write_metrics(Path(folder), {"epochs": [{"epoch": number, **figures}
                                                        for number in range(1, epoch + 1)]})
                start = time.perf_counter()
                log_epochs(mlflow, run_id, Path(folder))
                samples.append(time.perf_counter() - start)
    return samples


def render(runs: dict[str, list[float]], logged: list[float], epochs: int) -> str:
    ratios = [tracked / untracked for tracked, untracked in zip(runs[TRACKED], runs[UNTRACKED])]
    epoch = summary(runs[UNTRACKED])[0]
    share, cost = summary(logged)[0] / epoch, summary(ratios)[0] - 1
    break_even = summary(logged)[0] / GOAL
    return "\n".join([
        "## Tracking in MLflow: what it costs an epoch", "",
        f"Machine: {machine()}, CPU only. Command: `{command_line('tracking')}`: a local `mlflow server` (SQLite "
        f"store, this machine); the bench task (`hpc_train/bench/bench_task.py`, {STEPS_PER_EPOCH} steps per epoch) "
        f"under `hpc-train train`, {epochs} epochs, untracked and tracked, {len(ratios)} rounds in alternating "
        "order. Tracked, the chief's own thread logs each epoch as metrics.json gains it: the training process "
        "shares its interpreter with the logging, the worst case (a job's body logs from a process of its own).",
        "",
        f"Goal: tracking costs under {GOAL:.0%} of the epoch time. Side by side, the tracked epochs took "
        f"**{1 + cost:.3f}x** the untracked ones (median of the rounds): **{'met' if cost < GOAL else 'missed'}**, "
        "the training loop never waits on the tracker. The logging's own work, in its thread, is "
        f"{summary(logged)[0] * 1000:.1f} ms per epoch: {share:.1%} of this task's {epoch:.2f}-s epochs were it all "
        f"taken from the loop, under {GOAL:.0%} of any epoch of {break_even:.1f} s or more.", "",
        *table(("run", "epoch training s, median", "min-max"),
               [(name, *spread(samples, 3)) for name, samples in runs.items()]),
        "", *table(("figure", "median", "min-max"), [
            ("tracked / untracked epoch time, same round", *spread(ratios, 3)),
            ("one epoch's logging (log_epochs: read metrics.json, one log_batch), ms", *spread(logged, 1, 1000)),
            ("one epoch's logging / untracked epoch time, %", *spread([s / epoch for s in logged], 2, 100))]),
        "", "The tracked/untracked ratio is the difference of two noisy epoch times: its spread is the machine's, "
        "several times the effect; the logging's own time, measured apart, is what an epoch can lose at most.", ""])


def main(argv: list[str] | None = None) -> int:
    args = parsed("tracking", __doc__ or "", argv, repetitions=3, epochs=4)
    import importlib.util

    if importlib.util.find_spec("mlflow") is None:
        print("hpc-train bench tracking: needs MLflow: pip install 'hpc-train[mlflow]'", file=sys.stderr)
        return 2
    from hpc_train.tracking.server import free_port, start_server, stop_server

    repetitions = 2 if args.quick else args.repetitions
    with tempfile.TemporaryDirectory(prefix="hpc-train-bench-mlflow-") as folder:
        progress("starting a local mlflow server")
        server, uri = start_server(Path(folder), free_port())
        try:
            runs = interleaved({UNTRACKED: lambda: epoch_seconds(None, args.epochs),
                                TRACKED: lambda: epoch_seconds(uri, args.epochs)}, repetitions, lambda s: f"{s:.3f} s")
            logged = logging_seconds(uri, args.epochs, 5 if args.quick else 10)
        finally:
            stop_server(server)
    publish("tracking", render(runs, logged, args.epochs), write=not args.quick)
    return 0
