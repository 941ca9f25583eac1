"""Faults: a task killed at a random step of a 2-node run, healed by a retry, against the same run uninterrupted.

    hpc-train bench faults [--repetitions K] [--epochs E] [--quick]

On the Slurm SLURM_CONF names (`hpc-train cluster up` makes one here; at least
3 nodes, so that the retry has a node to move to), each repetition runs
slurm/mnist_2node.sh twice, one after the other, in alternating order:
- uninterrupted: E epochs;
- healed: the same, rank 1's process SIGKILLed at a random moment of its
  training (as a crash would), retried by hpc-train on other nodes.
Per healed run: the time from the kill to training resumed (state.json's
history: `resumed_at`), the steps redone, and goodput = the uninterrupted
run's training time / the healed run's wall time (RUNNING to COMPLETED), with
the uninterrupted run's own training / wall time beside it. Goodput with one
failure every 5 minutes is projected from the measured cost of a failure.
Rewrites its section of BENCHMARKS.md and benchmarks/faults.png.
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hpc_train.bench.report import (ROOT, command_line, figure, machine, parsed, progress, publish, pyplot,
                                    require_slurm, spread, table)
from hpc_train.errors import HpcTrainError
from hpc_train.runs import attempts
from hpc_train.runs.metrics import read_metrics
from hpc_train.slurm.client import SlurmClient

RESUME_GOAL_SECONDS = 45.0
GOODPUT_GOAL = 0.80
FAILURE_EVERY_SECONDS = 300.0
JOB_TIMEOUT = 900.0


@dataclass(frozen=True)
class Run:
    wall: float  # RUNNING to COMPLETED, seconds
    training: float  # metrics.json: the epochs' seconds
    resume: float | None = None  # kill to training resumed (healed runs)
    redone: int | None = None  # steps trained twice
    lost: float | None = None  # the history's seconds_lost: last checkpoint to training again


def submit(workdir: Path, epochs: int, slurm: SlurmClient) -> str:
    return slurm.submit_script(str(ROOT / "slurm" / "mnist_2node.sh"),
                               ["--set", f"epochs={epochs}", "--set", "checkpoint_minutes=0.25"], cwd=workdir)


def state(job: str, slurm: SlurmClient) -> str:
    return slurm.queued_states([job]).get(job, "GONE")


def wait_until(job: str, slurm: SlurmClient, done: set[str]) -> str:
    deadline = time.monotonic() + JOB_TIMEOUT
    while (now := state(job, slurm)) not in done:
        if time.monotonic() > deadline or now in ("FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "GONE"):
            slurm.cancel([job])
            raise HpcTrainError(f"job {job} ended {now} instead of {'/'.join(sorted(done))}; see its log")
        time.sleep(0.2)
    return now


def run_dir(workdir: Path, job: str) -> Path:
    return workdir / "runs" / f"mnist-2node-{job}"


def training_started(workdir: Path, job: str, slurm: SlurmClient) -> None:
    log = workdir / f"slurm-mnist-2node-{job}.out"
    deadline = time.monotonic() + JOB_TIMEOUT
    while "training: first steps done" not in (log.read_text() if log.exists() else ""):
        if time.monotonic() > deadline or state(job, slurm) not in ("PENDING", "RUNNING", "CONFIGURING"):
            slurm.cancel([job])
            raise HpcTrainError(f"job {job} never began training; see {log}")
        time.sleep(0.1)


def rank_process(job: str, rank: int) -> int | None:
    """The pid of the trainer process of one rank of a job on this machine (its SLURM_PROCID), or None."""
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            variables = dict(item.split(b"=", 1) for item in environ.read_bytes().split(b"\0") if b"=" in item)
            comm = (environ.parent / "comm").read_text().strip()
        except OSError:
            continue
        if (variables.get(b"SLURM_JOB_ID") == job.encode() and variables.get(b"SLURM_PROCID") == str(rank).encode()
                and comm.startswith(("python", "hpc-train"))):
            return int(environ.parent.name)
    return None


def one_run(workdir: Path, epochs: int, slurm: SlurmClient, kill_within: float | None) -> Run:
    job = submit(workdir, epochs, slurm)
    wait_until(job, slurm, {"RUNNING", "COMPLETED"})
    running = time.monotonic()
    killed_at = None
    if kill_within is not None:
        training_started(workdir, job, slurm)
        time.sleep(random.uniform(1.0, kill_within))
        pid = rank_process(job, 1)
        if pid is None:
            slurm.cancel([job])
            raise HpcTrainError(f"rank 1 of job {job} not found on this machine (the bench kills a local process)")
        os.kill(pid, signal.SIGKILL)
        killed_at = time.time()
    wait_until(job, slurm, {"COMPLETED"})
    wall = time.monotonic() - running
    folder = run_dir(workdir, job)
    training = read_metrics(folder, strict=True)["totals"]["seconds"]
    if killed_at is None:
        return Run(wall, training)
    history = attempts.history(folder)
    healed = next((entry for entry in history if "resumed_at" in entry), None)
    if healed is None:
        raise HpcTrainError(f"job {job} completed without a recorded retry; see its log")
    return Run(wall, training, healed["resumed_at"] - killed_at, healed.get("steps_redone"), healed.get("seconds_lost"))


def measure(repetitions: int, epochs: int, data: Path) -> list[tuple[Run, Run]]:
    slurm = SlurmClient.local({**os.environ, "HPC_TRAIN_HOME": str(ROOT), "HPC_TRAIN_DATA_DIR": str(data)})
    pairs = []
    with tempfile.TemporaryDirectory(prefix="hpc-train-bench-faults-") as folder:
        workdir = Path(folder)
        for repetition in range(repetitions):
            plain: Run | None = None
            if repetition % 2 == 0:
                plain = one_run(workdir, epochs, slurm, None)
            probe = plain.training if plain else epochs * 1.0
            healed = one_run(workdir, epochs, slurm, kill_within=max(2.0, 0.7 * probe))
            if plain is None:
                plain = one_run(workdir, epochs, slurm, None)
            pairs.append((plain, healed))
            progress(f"repetition {repetition + 1}/{repetitions}: killed to resumed {healed.resume:.1f} s, "
                     f"{healed.redone} steps redone, goodput {plain.training / healed.wall:.0%} "
                     f"(uninterrupted {plain.training / plain.wall:.0%})")
    return pairs


def projected_goodput(lost_per_failure: float, every: float = FAILURE_EVERY_SECONDS) -> float:
    """Training done per wall-clock second with one failure every `every` seconds, each costing `lost` (pure)."""
    return every / (every + lost_per_failure)


def render(pairs: list[tuple[Run, Run]], epochs: int) -> str:
    plain = [pair[0] for pair in pairs]
    healed = [pair[1] for pair in pairs]
    resume = [run.resume for run in healed if run.resume is not None]
    lost = [run.lost for run in healed if run.lost is not None]
    redone = [float(run.redone) for run in healed if run.redone is not None]
    goodput = [p.training / h.wall for p, h in pairs]
    own = [p.training / p.wall for p in plain]
    rows = [
        ("kill to training resumed on other nodes, s (goal: median <= 45)", *spread(resume, 1)),
        ("time lost per failure (last checkpoint to training again), s", *(spread(lost, 1) if lost else ("-", "-"))),
        ("steps redone", *(spread(redone) if redone else ("-", "-"))),
        ("wall time, uninterrupted, s", *spread([p.wall for p in plain], 1)),
        ("wall time, healed, s", *spread([h.wall for h in healed], 1)),
        ("goodput, uninterrupted (its training / its wall time)", *spread(own, 2)),
        ("goodput, healed (uninterrupted training / healed wall time)", *spread(goodput, 2)),
    ]
    median_lost = statistics.median(lost or resume)
    return "\n".join([
        "## Faults: a task killed, healed by a retry",
        "",
        f"Machine: {machine()}; Slurm: the local cluster (`hpc-train cluster up`, 4 nodes on this machine). "
        f"Command: `{command_line('faults')}`: {len(pairs)} repetitions of slurm/mnist_2node.sh, {epochs} epochs "
        "(checkpoint_minutes=0.25), uninterrupted and healed in alternating order; in the healed run rank 1's "
        "process is SIGKILLed at a random moment of its training, and hpc-train requeues the job without its node.",
        "",
        *table(("per run", "median", "min-max"), rows),
        "",
        f"With one failure every {FAILURE_EVERY_SECONDS / 60:.0f} minutes, each costing the median "
        f"{median_lost:.1f} s measured here, training keeps {projected_goodput(median_lost):.0%} of the wall "
        f"time (goal: {GOODPUT_GOAL:.0%}). The runs here are short ({epochs} epochs), so one failure in each "
        "weighs more than one in 5 minutes would. Where the time goes: Slurm ends the step (the peer's "
        "collective fails at once on a kill, after the heartbeat timeout on a hang), the epilogue requeues the "
        "job, Slurm starts it again a few seconds later (its requeue delay), and TensorFlow starts and restores.",
        "",
        "![kill to resume, and goodput](benchmarks/faults.png)",
    ])


def plot(pairs: list[tuple[Run, Run]]) -> None:
    plt = pyplot()
    if plt is None:
        return
    healed = [pair[1] for pair in pairs]
    figure_, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    runs = range(1, len(pairs) + 1)
    left.bar(runs, [run.resume or 0 for run in healed], color="tab:orange")
    left.axhline(RESUME_GOAL_SECONDS, color="gray", linestyle="--", label="goal 45 s")
    left.set(xlabel="repetition", ylabel="seconds", title="kill to training resumed on other nodes")
    left.legend()
    width = 0.4
    right.bar([r - width / 2 for r in runs], [p.training / p.wall for p, _ in pairs], width, label="uninterrupted")
    right.bar([r + width / 2 for r in runs], [p.training / h.wall for p, h in pairs], width, label="healed")
    right.axhline(GOODPUT_GOAL, color="gray", linestyle="--", label="goal 80%")
    right.set(xlabel="repetition", ylabel="training time / wall time", title="goodput", ylim=(0, 1))
    right.legend()
    figure_.tight_layout()
    figure_.savefig(figure("faults.png"), dpi=120)
    plt.close(figure_)


def main(argv: Sequence[str] | None = None) -> int:
    args = parsed("faults", __doc__, argv, repetitions=5, data_dir=True, epochs=40)
    if not require_slurm("faults"):
        return 2
    if len(SlurmClient.local(os.environ).node_states()) < 3:
        print("hpc-train bench faults: needs at least 3 nodes (a 2-node job and one to move to): "
              "hpc-train cluster up --nodes 'node[1-4]'", file=sys.stderr)
        return 2
    pairs = measure(2 if args.quick else args.repetitions, args.epochs, args.data_dir)
    publish("faults", render(pairs, args.epochs), not args.quick, lambda: plot(pairs))
    resume = statistics.median(run.resume for _, run in pairs if run.resume is not None)
    return 0 if resume <= RESUME_GOAL_SECONDS else 1
