"""Running the scaling benchmark's jobs on Slurm: job scripts, submitting and waiting, reading results."""

from __future__ import annotations

import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from hpc_train.bench.report import HPC_TRAIN, progress
from hpc_train.bench.scaling.runs import EPOCHS, INDEPENDENT, WARMUP_EPOCHS, Result, Run, plan
from hpc_train.errors import HpcTrainError
from hpc_train.runs.metrics import read_metrics
from hpc_train.slurm.client import SlurmClient

JOB_TIMEOUT = 600


ENDED_MARKER = "job-ended"


MARKER_POLL_SECONDS = 0.2  # a stat: costs nothing measurable


QUEUE_POLL_SECONDS = 5.0


def sbatch_header(name: str, nodes: int, output: Path) -> list[str]:
    """A job's first lines: one task per node, its log in `output`, which BENCH_OUTPUT names too.

    The script touches ENDED_MARKER in `output` as it exits, however it exits, for `run_job` to see.
    """
    return ["#!/bin/bash", f"#SBATCH --job-name={name}", f"#SBATCH --nodes={nodes}", "#SBATCH --ntasks-per-node=1",
            "#SBATCH --time=00:15:00", f"#SBATCH --output={shlex.quote(str(output / 'slurm.out'))}",
            "set -euo pipefail", f"export BENCH_OUTPUT={shlex.quote(str(output))}",
            # `|| true`: a marker that cannot be written must not fail the job; run_job then finds its end by squeue.
            f'trap \'touch "$BENCH_OUTPUT/{ENDED_MARKER}" || true\' EXIT']


def bound_step(command: Sequence[str], cores: int) -> str:
    """srun the command once per task, task i bound to core i mod cores; every value quoted."""
    bind = f'exec taskset -c $((SLURM_PROCID % {cores})) "$0" "$@"'
    return f"srun --kill-on-bad-exit=1 bash -c {shlex.quote(bind)} {shlex.join(command)}"


def job_script(run: Run, data_dir: Path, output: Path, cores: int) -> str:
    """An sbatch script for one run: one task per node, task i bound to core i mod cores; every value quoted."""
    settings = {"strategy": "none" if run.strategy == INDEPENDENT else run.strategy,
                "batch_size": run.batch, "learning_rate": f"{run.learning_rate:.6g}", "epochs": EPOCHS,
                "steps_per_epoch": run.steps_per_epoch, "validation_images": 2000}
    train = [HPC_TRAIN, "train", "--data-dir", str(data_dir), "--output-dir", str(output),
             *(part for key, value in settings.items() for part in ("--set", f"{key}={value}"))]
    header = sbatch_header(f"bench-{run.strategy}-{run.workers}x{run.batch}", run.tasks, output)
    if run.strategy != INDEPENDENT:
        return "\n".join([*header, bound_step(train, cores), ""])
    # One single-task step per node at once, each its own training into its own folder.
    bind = f'exec taskset -c $((BENCH_RANK % {cores})) "$0" "$@" --set "output_dir=$BENCH_OUTPUT/task$BENCH_RANK"'
    return "\n".join([
        *header,
        "pids=()",
        f"for rank in $(seq 0 {run.tasks - 1}); do",
        f"  BENCH_RANK=$rank srun --nodes=1 --ntasks=1 --relative=$rank bash -c {shlex.quote(bind)} "
        f"{shlex.join(train)} &",
        "  pids+=($!)",
        "done",
        'for pid in "${pids[@]}"; do wait "$pid"; done',
        "",
    ])


def run_job(script: str, folder: Path) -> None:
    """Submit the script and wait for it to end; raise with the job's log when it failed.

    While the job runs, this process only looks for the marker its script
    touches as it ends, and asks squeue every QUEUE_POLL_SECONDS, for a job
    that ends without it (cancelled, or never started). Asking squeue twice
    a second, as before, cost about a core's 1% (squeue and slurmctld), taken
    from a worker's core once every core runs one, and so from every worker
    of a job that waits for its slowest (2 workers at 1,024 images per worker:
    88% efficiency polling at 0.5 s against 90% at 5 s, 4 repetitions side by side).
    `sbatch --wait` backs off to tens of seconds between polls.
    """
    path = folder / "job.sbatch"
    path.write_text(script)
    slurm = SlurmClient.local(os.environ)
    job = slurm.submit_script(str(path), cwd=folder)
    deadline = time.monotonic() + JOB_TIMEOUT
    next_query = time.monotonic()
    while True:
        # Once its script has ended, Slurm takes a moment to complete the job: ask at the marker's pace.
        ended = (folder / ENDED_MARKER).exists()
        if ended or time.monotonic() >= next_query:
            if not slurm.queue_state(job):
                break
            next_query = time.monotonic() + QUEUE_POLL_SECONDS
        if time.monotonic() > deadline:
            slurm.cancel([job])
            raise HpcTrainError(f"benchmark job {job} ran past {JOB_TIMEOUT} s and was cancelled; is the cluster "
                                "busy? (squeue)")
        time.sleep(MARKER_POLL_SECONDS)
    info = slurm.show_job(job)
    if info.get("JobState") != "COMPLETED":
        state = " ".join(f"{key}={value}" for key, value in info.items())
        log = folder / "slurm.out"
        progress(f"the end of job {job}'s log:\n" + (log.read_text()[-3000:] if log.exists() else state))
        raise HpcTrainError(f"benchmark job {job} did not complete (its log's end is above)")


def train(run: Run, data_dir: Path, cores: int) -> Result:
    with tempfile.TemporaryDirectory(prefix="hpc-train-bench-") as work:
        folder = Path(work)
        run_job(job_script(run, data_dir, folder, cores), folder)
        outputs = [folder / f"task{rank}" for rank in range(run.tasks)] if run.strategy == INDEPENDENT else [folder]
        results = [result_of(read_metrics(output, strict=True)) for output in outputs]
    # Side by side, the tasks' images/s add up; the worst accuracy speaks for them.
    return Result(sum(result.images_per_second for result in results), min(result.accuracy for result in results))


def result_of(metrics: dict) -> Result:
    rates = [epoch["images_per_second"] for epoch in metrics["epochs"]][WARMUP_EPOCHS:]
    return Result(statistics.median(rates), metrics["epochs"][-1]["val_accuracy"])


def allreduce_link(cores: int) -> dict:
    """Median all-reduce seconds per size between two tasks on two cores (one Slurm job)."""
    with tempfile.TemporaryDirectory(prefix="hpc-train-bench-") as work:
        folder = Path(work)
        command = [HPC_TRAIN, "bootstrap", "--", sys.executable, "-m", "hpc_train.bench.allreduce"]
        run_job("\n".join([*sbatch_header("bench-allreduce", 2, folder), bound_step(command, cores), ""]), folder)
        lines = [line for line in (folder / "slurm.out").read_text().splitlines() if line.startswith("{")]
    return json.loads(lines[-1])


def measure(data_dir: Path, batches: Sequence[int], repetitions: int) -> dict[Run, list[Result]]:
    cores = os.cpu_count() or 1
    results: dict[Run, list[Result]] = {}
    for repetition in range(repetitions):
        runs = plan(batches, repetition)
        for number, run in enumerate(runs, 1):
            result = train(run, data_dir, cores)
            results.setdefault(run, []).append(result)
            progress(f"repetition {repetition + 1}/{repetitions}, job {number}/{len(runs)}: {run.strategy}, "
                     f"{run.workers} worker(s), batch {run.batch}: {result.images_per_second:,.0f} images/s")
    return results
