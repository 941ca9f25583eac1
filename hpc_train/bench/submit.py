"""Submitting: `hpc-train submit` against a raw `sbatch` of the same script, on the Slurm SLURM_CONF names.

    hpc-train bench submit [--repetitions N] [--quick]

Two comparisons, interleaved, each run its own process:
- submit -> running: from the command's start until `squeue` reports the job
  RUNNING (polled every 20 ms); the job is cancelled at once and the nodes are
  idle again before the next run;
- the command alone: start to job id printed, the job submitted held (`--hold`)
  and cancelled, so nothing runs; `python -c pass` for scale.
Rewrites its section of BENCHMARKS.md.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from hpc_train.bench.report import (HPC_TRAIN, command_line, interleaved, opening, parsed, publish, require_slurm,
                                    spread, summary, table)
from hpc_train.errors import HpcTrainError
from hpc_train.slurm.client import SlurmClient

GOAL = 2.0
POLL_SECONDS = 0.02
RUNNING_TIMEOUT = 120.0
WAITING = ("PENDING", "CONFIGURING")
# What `hpc-train submit --nodes 2` asks for, as a plain script (submit's own script needs submitit's job folder).
SAME_REQUEST = ("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --output=/dev/null\n"
                "srun sleep 60\n")
SBATCH_RUNNING = "`sbatch SCRIPT` -> RUNNING"
SUBMIT_RUNNING = "`hpc-train submit --nodes 2` -> RUNNING"
SBATCH_HELD = "`sbatch --hold SCRIPT`"
SUBMIT_HELD = "`hpc-train submit --nodes 2 --hold`"
PYTHON = "`python -c pass`"


def job_state(job: str) -> str:
    """The job's state while it is queued, "" once it left the queue."""
    return SlurmClient.local().queue_state(job)


def submitted(command: Sequence[str], cwd: Path) -> tuple[float, str]:
    """Run a submitting command; (its start time, the job id it printed last on its first line)."""
    started = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=True)
    return started, result.stdout.strip().splitlines()[0].split()[-1].split(";")[0]


def until_running(command: Sequence[str], cwd: Path) -> float:
    started, job = submitted(command, cwd)
    deadline = time.monotonic() + RUNNING_TIMEOUT
    while (state := job_state(job)) != "RUNNING":
        if state not in WAITING or time.monotonic() > deadline:
            SlurmClient.local().cancel([job])
            raise HpcTrainError(f"job {job} did not start running ({state or 'gone from the queue'}); "
                                "is the cluster idle? (sinfo, squeue)")
        time.sleep(POLL_SECONDS)
    seconds = time.perf_counter() - started
    _cancel(job)
    while job_state(job):  # gone from the queue: its nodes are free for the next run
        time.sleep(0.2)
    return seconds


def held(command: Sequence[str], cwd: Path) -> float:
    started, job = submitted(command, cwd)
    seconds = time.perf_counter() - started
    _cancel(job)
    return seconds


def _cancel(job: str) -> None:
    problem = SlurmClient.local().cancel([job])
    if problem is not None:
        raise HpcTrainError(f"scancel {job} failed ({problem}); cancel it by hand")


def measure(repetitions: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(prefix="hpc-train-bench-") as work:
        folder = Path(work)
        submit = [HPC_TRAIN, "submit", "--nodes", "2", "--set", "epochs=1"]
        script = folder / "job.sbatch"
        script.write_text(SAME_REQUEST)
        runs = {SBATCH_RUNNING: lambda: until_running(["sbatch", str(script)], folder),
                SUBMIT_RUNNING: lambda: until_running(submit, folder),
                SBATCH_HELD: lambda: held(["sbatch", "--hold", str(script)], folder),
                SUBMIT_HELD: lambda: held([*submit, "--hold"], folder),
                PYTHON: _python_start}
        return interleaved(runs, repetitions, lambda seconds: f"{seconds * 1000:.0f} ms")


def _python_start() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - started


def render(samples: dict[str, list[float]]) -> str:
    def rows(names: Sequence[str], baseline: str) -> list[tuple]:
        return [(name, *spread(samples[name], scale=1000), *spread(
            [value / base for value, base in zip(samples[name], samples[baseline])], 2)) for name in names]

    header = ("command", "ms, median", "min-max", "ratio to sbatch, median", "min-max")
    return "\n".join([
        *opening("Submitting",
                 "; Slurm: the local cluster (`hpc-train cluster up`), whose controller answers on this machine. "
                 f"Command: `{command_line('submit')}`: {len(samples[PYTHON])} interleaved repetitions; sbatch gets a "
                 "script asking for the same 2 nodes, 1 task each."),
        "",
        "### Submit to running (goal: within 2x of sbatch)",
        "",
        *table(header, rows((SBATCH_RUNNING, SUBMIT_RUNNING), SBATCH_RUNNING)),
        "",
        "### The command alone (held jobs, nothing runs)",
        "",
        *table(header, rows((SBATCH_HELD, SUBMIT_HELD, PYTHON), SBATCH_HELD)),
        "",
        "What `submit` adds to sbatch is Python's start, importing submitit (most of it asyncio, which submitit "
        "imports), checking the request and writing the job folder; it never imports TensorFlow (tested in "
        "tests/login/test_submission.py). A local sbatch answers in milliseconds, less than Python takes to start, "
        "so the command alone cannot come within 2x of it; from submission to a running job, the scheduler's "
        "own latency dominates, as it does on a production cluster.",
    ])


def main(argv: Sequence[str] | None = None) -> int:
    args = parsed("submit", __doc__, argv, repetitions=9)
    if not require_slurm("submit"):
        return 2
    samples = measure(2 if args.quick else args.repetitions)
    publish("submit", render(samples), write=not args.quick)
    ratio = summary([s / b for s, b in zip(samples[SUBMIT_RUNNING], samples[SBATCH_RUNNING])])[0]
    return 0 if ratio <= GOAL else 1
