"""An input-bound job with TensorFlow's data service and without it, side by side (issue 47's evidence).

The same training (benchmarks/input_bound_task.py: upscaled MNIST, heavy per-example augmentation, a small model),
one rank, `hpc-train submit` on a local Slurm cluster of its own, in two arms:

  alone:   the rank pinned to one core (RANK_CORE), reading its own input there;
  served:  the rank pinned to that core, the job's data service (`--data-workers 1`: the job body's dispatcher and
           one data worker, started as Slurm steps beside the rank, docs/data_service.md) pinned to the other core
           (SERVICE_CORE),

so that two cores show what a GPU node with too few CPUs for its input feels. Each round runs both arms, one after
the other, in alternating order (alone first in odd rounds, served first in even ones), so that a machine whose load
drifts weighs on both alike; each round's ratio pairs its own two runs. For each run it reads the run folder:
images/s (metrics.json: the epochs after the first, whose tracing and warm-up it leaves out), validation accuracy
(the last epoch's) and the ledger's `input` share (ledger.json: input / (input + compute)), and prints a Markdown
table; `--png PATH` draws images/s by round. `--kill-worker` runs one more job instead: 2 data workers, one killed
(SIGKILL) once the second epoch has ended; it prints the seconds the killed worker's epoch took beyond the others
(the training lost), the ledger's input seconds, and the job's end (COMPLETED is what it must be). That job asks
2 CPUs (`--cpus-per-task 2`): the workers' step of 2 tasks must fit in the job's allocation.

Why a local Slurm cluster, and why the pinning is done from here. The service is the job body's (injob/
dataservice.py): `srun --overlap` steps started around the ranks' step, given ports from the job's window; only a
Slurm job runs that path (`--local` runs without the service), so the benchmark brings up a cluster of its own, as
benchmarks/packed_vs_arrays.py does (one node, dsb1, in /tmp/hpc-train-bench-dsvc). Its slurm.conf has
TaskPlugin=task/none (its "nodes" share one machine, with no cgroups), so srun's --cpu-bind does nothing there, and
the job body's steps are not ours to wrap in taskset. So this script pins the job's processes itself, as a real
node's task/affinity or cgroup cpusets would: every thread of every process of the job (found by SLURM_JOB_ID and
SLURM_CONF in its environment), again every PIN_EVERY seconds for threads and processes that appear later (a data
worker started again): the rank (`hpc_train train`) to RANK_CORE, everything else of the job (the data service, the
job body, srun) to SERVICE_CORE. Neither arm's rank shares its core with anything of its own job; in the `alone`
arm SERVICE_CORE holds only the idle job body. What else runs on this machine is not pinned, and shares both cores
(the scheduler is fair per thread, so under load the `alone` rank, with its pipeline's threads, gets more of its core
than the `served` one: run it on an idle machine, or with `--nice -10`, which puts the job's threads first).

    .venv/bin/python benchmarks/data_service_input_bound.py [--rounds 3] [--epochs 3] [--work 6] [--png PATH]
    .venv/bin/python benchmarks/data_service_input_bound.py --kill-worker --epochs 4

As root (the local cluster); MNIST from ../shared/data/mnist or --data-dir. A round (two jobs of 3 epochs) took
about 1.5 minutes on the loaded machine here, `--rounds 2` 3 min 20 s with the cluster's start and stop;
`--kill-worker` about 1.5 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "benchmarks" / "input_bound_task.py"
DATA = ROOT.parent / "shared" / "data" / "mnist"
RANK_CORE, SERVICE_CORE = 0, 1
TICKS = os.sysconf("SC_CLK_TCK")
PIN_EVERY = 0.5  # seconds between looks for the job's new processes and threads (a light scan of /proc)
SERVERS = b"hpc_train.data_service.servers"
RANK = b"hpc_train\0train\0"  # the rank's command line: python -u -m hpc_train train --config ...
ARMS = ("alone", "served")
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED"}


@dataclass(frozen=True)
class Run:
    """One job's figures, read from its run folder."""

    arm: str
    round: int
    images_per_second: float
    val_accuracy: float
    input_share: float
    job: str
    state: str
    rank_cpu: float = 0.0  # CPU seconds: the rank's, the data service's
    service_cpu: float = 0.0


# ---- pure: what the figures are, and the table ----

def round_order(number: int) -> tuple[str, ...]:
    """The arms of round `number` (1-based) in the order they run: alternating, so that drift weighs on both."""
    return ARMS if number % 2 else ARMS[::-1]


def warm_throughput(epochs: Sequence[Mapping[str, Any]]) -> float:
    """Training images/s over the epochs after the first (its tracing and the pipeline's warm-up left out); the
    only epoch's when there is one."""
    warm = list(epochs[1:]) or list(epochs)
    seconds = sum(epoch["training_seconds"] for epoch in warm)
    return sum(epoch["images"] for epoch in warm) / seconds if seconds > 0 else 0.0


def input_share(ledger: Mapping[str, Any]) -> float:
    """The ledger's `input` share of the training steps' time, over the job: input / (input + compute)."""
    total = ledger.get("total", {})
    steps = total.get("input", 0.0) + total.get("compute", 0.0)
    return total.get("input", 0.0) / steps if steps > 0 else 0.0


def paired_ratios(runs: Sequence[Run]) -> list[tuple[int, float]]:
    """(round, served images/s / alone images/s) for each round that has both arms, by round."""
    by_round: dict[int, dict[str, Run]] = {}
    for run in runs:
        by_round.setdefault(run.round, {})[run.arm] = run
    return [(number, arms["served"].images_per_second / arms["alone"].images_per_second)
            for number, arms in sorted(by_round.items())
            if set(arms) == set(ARMS) and arms["alone"].images_per_second > 0]


def table(runs: Sequence[Run]) -> str:
    """The Markdown table: each round's two runs and their ratio, then the medians."""
    ratios = dict(paired_ratios(runs))
    lines = ["| round | alone: images/s | served: images/s | ratio | alone: val. acc. | served: val. acc. "
             "| alone: input share | served: input share |", "|---|---|---|---|---|---|---|---|"]
    by_round: dict[int, dict[str, Run]] = {}
    for run in runs:
        by_round.setdefault(run.round, {})[run.arm] = run

    def cell(arms: Mapping[str, Run], arm: str, field: str, form: str) -> str:
        return format(getattr(arms[arm], field), form) if arm in arms else "-"

    for number, arms in sorted(by_round.items()):
        ratio = f"{ratios[number]:.2f}x" if number in ratios else "-"
        lines.append(f"| {number} | {cell(arms, 'alone', 'images_per_second', '.0f')} | "
                     f"{cell(arms, 'served', 'images_per_second', '.0f')} | {ratio} | "
                     f"{cell(arms, 'alone', 'val_accuracy', '.2%')} | {cell(arms, 'served', 'val_accuracy', '.2%')} | "
                     f"{cell(arms, 'alone', 'input_share', '.0%')} | {cell(arms, 'served', 'input_share', '.0%')} |")
    if ratios:
        def median(arm: str, field: str) -> float:
            return statistics.median(getattr(run, field) for run in runs if run.arm == arm)

        lines.append(f"| median | {median('alone', 'images_per_second'):.0f} | "
                     f"{median('served', 'images_per_second'):.0f} | {statistics.median(ratios.values()):.2f}x | "
                     f"{median('alone', 'val_accuracy'):.2%} | {median('served', 'val_accuracy'):.2%} | "
                     f"{median('alone', 'input_share'):.0%} | {median('served', 'input_share'):.0%} |")
    return "\n".join(lines)


def lost_seconds(epochs: Sequence[Mapping[str, Any]], killed_in: int) -> float:
    """The training seconds epoch `killed_in` (1-based) took beyond the median of the other warm epochs (the first
    left out): what losing a data worker in it cost."""
    others = [epoch["training_seconds"] for epoch in epochs[1:] if epoch["epoch"] != killed_in]
    killed = [epoch["training_seconds"] for epoch in epochs if epoch["epoch"] == killed_in]
    if not others or not killed:
        raise ValueError(f"epoch {killed_in} and another warm epoch are needed, got epochs "
                         f"{[epoch['epoch'] for epoch in epochs]}")
    return killed[0] - statistics.median(others)


def role_of(cmdline: bytes) -> str:
    """What a process of the job is: the rank, the data service (dispatcher, worker), or the rest (body, srun)."""
    if SERVERS in cmdline:
        return "service"
    return "rank" if RANK in cmdline else "job"


def core_for(role: str) -> int:
    """Where a process of the job goes: the rank to RANK_CORE, the rest (the service, the body, srun) to the other."""
    return RANK_CORE if role == "rank" else SERVICE_CORE


# ---- the edges: the cluster, the jobs, the pinning ----

class Pinner(threading.Thread):
    """Pins every thread of the job's processes (core_for), now and as they appear, until stopped."""

    def __init__(self, job: str, conf: str, nice: int = 0) -> None:
        super().__init__(daemon=True)
        self.nice = nice  # each thread's niceness (0: as started; below 0 puts the job before the machine's other work)
        self.job, self.conf = job.encode(), conf.encode()
        self.roles: dict[int, str] = {}  # pid -> role_of, for the job's processes seen
        self.cpu: dict[int, float] = {}  # pid -> its CPU seconds (user + system) when last seen
        self.others: set[int] = set()  # pids seen that are not the job's
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(PIN_EVERY):
            self.scan()

    def scan(self) -> None:
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) in self.others:
                continue
            pid = int(entry.name)
            if pid not in self.roles:
                try:
                    variables = dict(item.split(b"=", 1) for item in
                                     Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in item)
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if variables.get(b"SLURM_JOB_ID") != self.job or variables.get(b"SLURM_CONF") != self.conf:
                    self.others.add(pid)
                    continue
                self.roles[pid] = role_of(cmdline)
            core = core_for(self.roles[pid])
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                self.cpu[pid] = (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime
                threads = [int(task.name) for task in os.scandir(f"/proc/{pid}/task")]
            except OSError:
                continue  # it ended
            for thread in threads:
                try:
                    if os.sched_getaffinity(thread) != {core}:
                        os.sched_setaffinity(thread, {core})
                    if self.nice and os.getpriority(os.PRIO_PROCESS, thread) != self.nice:
                        os.setpriority(os.PRIO_PROCESS, thread, self.nice)
                except OSError:
                    pass  # the thread ended meanwhile

    def cpu_seconds(self, role: str) -> float:
        """The CPU seconds the job's processes of `role` used (as last seen)."""
        return sum(seconds for pid, seconds in self.cpu.items() if self.roles.get(pid) == role)


def job_state(job: str, env: Mapping[str, str]) -> str:
    shown = subprocess.run(["scontrol", "show", "job", "-o", job], env=dict(env), capture_output=True,
                           text=True).stdout
    return dict(part.split("=", 1) for part in shown.split() if "=" in part).get("JobState", "UNKNOWN")


def wait_for_end(job: str, env: Mapping[str, str], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while (state := job_state(job, env)) not in FINAL:
        if time.monotonic() > deadline:
            subprocess.run(["scancel", job], env=dict(env))
            return f"{state} (cancelled after {timeout:.0f} s)"
        time.sleep(1)
    return state


def submit(env: Mapping[str, str], workdir: Path, name: str, args: argparse.Namespace, workers: int,
           extra: Sequence[str] = ()) -> str:
    command = [sys.executable, "-m", "hpc_train", "submit", "--name", name, "--no-snapshot", "--nodes", "1",
               "--task", str(TASK), "--set", f"data_dir={args.data_dir}", "--set", f"epochs={args.epochs}",
               "--set", f"batch_size={args.batch_size}", *(["--data-workers", str(workers)] if workers else []), *extra]
    out = subprocess.run(command, cwd=workdir, env=dict(env), capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"submit failed: {out.stderr.strip()}")
    return out.stdout.split()[0]


def folder_of(workdir: Path, name: str, job: str) -> Path:
    return workdir / "runs" / f"{name}-{job}"


def read_run(folder: Path, arm: str, number: int, job: str, state: str, pinner: Pinner) -> Run:
    metrics = json.loads((folder / "metrics.json").read_text())
    ledger = json.loads((folder / "ledger.json").read_text())
    epochs = metrics["epochs"]
    return Run(arm, number, warm_throughput(epochs), float(epochs[-1].get("val_accuracy", float("nan"))),
               input_share(ledger), job, state, pinner.cpu_seconds("rank"), pinner.cpu_seconds("service"))


def one_job(env: Mapping[str, str], workdir: Path, arm: str, number: int, args: argparse.Namespace,
            conf: str) -> Run:
    name = f"ib-{arm}-r{number}"
    job = submit(env, workdir, name, args, 1 if arm == "served" else 0)
    pinner = Pinner(job, conf, args.nice)
    pinner.start()
    try:
        state = wait_for_end(job, env, args.job_timeout)
    finally:
        pinner.stopping.set()
    folder = folder_of(workdir, name, job)
    if state != "COMPLETED":
        sys.exit(f"job {job} ({arm}, round {number}) ended {state}; its folder: {folder}")
    run = read_run(folder, arm, number, job, state, pinner)
    print(f"round {number} {arm}: job {job}, {run.images_per_second:.0f} images/s, val. acc. "
          f"{run.val_accuracy:.2%}, input share {run.input_share:.0%}; CPU seconds: the rank {run.rank_cpu:.0f}, "
          f"the data service {run.service_cpu:.0f}; load {os.getloadavg()[0]:.1f}", flush=True)
    return run


def kill_worker(env: Mapping[str, str], workdir: Path, args: argparse.Namespace, conf: str) -> None:
    """2 data workers, worker 1 killed once epoch 2 has ended: the seconds lost, the ledger's input, the end."""
    name = "ib-kill"
    # 2 CPUs for the job's rank: the workers' step (2 tasks of 1 CPU, --overlap) fits in the job's allocation (its
    # request adds the workers' CPUs, docs/data_service.md), and the rank has the same 2 CPUs as before that did.
    job = submit(env, workdir, name, args, 2, ["--cpus-per-task", "2"])
    folder = folder_of(workdir, name, job)
    pinner = Pinner(job, conf, args.nice)
    pinner.start()
    try:
        deadline = time.monotonic() + args.job_timeout
        while "epoch 2/" not in logs(folder):
            if time.monotonic() > deadline or job_state(job, env) in FINAL:
                sys.exit(f"job {job} never ended its second epoch; its folder: {folder}")
            time.sleep(0.2)
        workers = [pid for pid, role in pinner.roles.items() if role == "service" and _is_worker(pid, b"1")]
        if not workers:
            sys.exit(f"no data worker 1 of job {job} found")
        os.kill(workers[0], signal.SIGKILL)
        print(f"killed data worker 1 (pid {workers[0]}) of job {job} in epoch 3", flush=True)
        state = wait_for_end(job, env, args.job_timeout)
    finally:
        pinner.stopping.set()
    metrics = json.loads((folder / "metrics.json").read_text())
    ledger = json.loads((folder / "ledger.json").read_text())
    epochs = metrics["epochs"]
    lines = logs(folder)
    print(f"job {job}: {state}; epochs' training seconds "
          f"{', '.join(format(epoch['training_seconds'], '.1f') for epoch in epochs)}; "
          f"epoch 3 (the kill's) took {lost_seconds(epochs, 3):.1f} s beyond the median of the other warm epochs; "
          f"ledger: input {ledger['total']['input']:.1f} s, compute {ledger['total']['compute']:.1f} s "
          f"(input share {input_share(ledger):.0%}); workers' step started again: "
          f"{'yes' if 'started again' in lines else 'no'}", flush=True)


def logs(folder: Path) -> str:
    """The job's log and the rank and service logs, as they are now."""
    return "".join(path.read_text(errors="replace")
                   for path in [*sorted(folder.glob("slurm-*.out")), *sorted(folder.glob("logs/*"))])


def _is_worker(pid: int, procid: bytes) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return (SERVERS + b"\0worker\0" in cmdline and b"SLURM_PROCID=" + procid in environ
            and Path(f"/proc/{pid}/comm").read_text().startswith("python"))


def draw(runs: Sequence[Run], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rounds = sorted({run.round for run in runs})
    figure, axes = plt.subplots(figsize=(6, 3.5))
    for offset, arm in ((-0.2, "alone"), (0.2, "served")):
        values = {run.round: run.images_per_second for run in runs if run.arm == arm}
        axes.bar([number + offset for number in rounds], [values.get(number, 0) for number in rounds], 0.4,
                 label=arm)
    axes.set_xlabel("round")
    axes.set_ylabel("training images/s")
    axes.set_xticks(rounds)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def bench_cluster(args: argparse.Namespace, script: str) -> tuple[Any, dict[str, str]]:
    """The benchmarks' local cluster (one node, 4 CPUs declared) brought up, the environment its jobs are submitted
    with, and the line that names the machine and the run; exits in one line when there is no cluster."""
    from hpc_train.errors import HpcTrainError
    from hpc_train.localslurm import control
    from hpc_train.localslurm.spec import LocalCluster

    cluster = control.placed(LocalCluster(Path("/tmp/hpc-train-bench-dsvc"), nodes="dsb1", cpus=4, gpus_per_node=0,
                                          controller_port=7747))
    try:
        control.up(cluster)
    except HpcTrainError as error:
        sys.exit(f"{script}: no local cluster: {error}")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("SLURM_", "HPC_TRAIN_"))}
    env.update({"SLURM_CONF": str(cluster.conf), "INPUT_BOUND_WORK": str(args.work),
                "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"})
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; rank on core {RANK_CORE}, the job's other processes on core "
          f"{SERVICE_CORE}; {args.epochs} epochs of batches of {args.batch_size}, {args.work} blur passes; load "
          f"{os.getloadavg()}", flush=True)
    return cluster, env


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--work", type=int, default=6, help="blur passes per example (INPUT_BOUND_WORK)")
    parser.add_argument("--data-dir", default=str(DATA))
    parser.add_argument("--job-timeout", type=float, default=600.0)
    parser.add_argument("--png", type=Path, default=None)
    parser.add_argument("--nice", type=int, default=0, help="the job's threads' niceness, e.g. -10 on a machine "
                        "whose other work would otherwise share the pinned cores (0: left as they start)")
    parser.add_argument("--kill-worker", action="store_true", help="the killed data worker's run instead")
    args = parser.parse_args(argv)
    if args.kill_worker and args.epochs < 4:
        parser.error("--kill-worker needs --epochs 4 or more (a worker is killed in epoch 3, compared with the rest)")
    if args.rounds < 1 or args.epochs < 2:
        parser.error("--rounds 1 or more and --epochs 2 or more (the first epoch's warm-up is left out)")
    from hpc_train.localslurm import control

    cluster, env = bench_cluster(args, "data_service_input_bound")
    try:
        workdir = Path(tempfile.mkdtemp(prefix="hpc-train-bench-dsvc-"))
        if args.kill_worker:
            kill_worker(env, workdir, args, str(cluster.conf))
            return
        runs = [one_job(env, workdir, arm, number, args, str(cluster.conf))
                for number in range(1, args.rounds + 1) for arm in round_order(number)]
        print(table(runs))
        if args.png:
            draw(runs, args.png)
    finally:
        control.down(cluster)


if __name__ == "__main__":
    main()
