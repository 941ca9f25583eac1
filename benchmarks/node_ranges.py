"""Node ranges against fixed sizes on a real local Slurm of 4 nodes (issue 37's evidence): time from submit to result
and final validation accuracy, the same training (one global batch of 240) in every job. Root; it brings up a
cluster of its own (/tmp/hpc-train-bench-range, nodes rg[1-4], 4 CPUs each) and brings it down at the end.

    python benchmarks/node_ranges.py [--part a|b|both] [--hold-seconds 150] [--epochs-a 3] [--epochs-b 60]

Part A: two nodes held by an `--exclusive` `sleep HOLD` job; then `--nodes 4` (A1) and, after it, with a fresh
hold, `--nodes 2-4` (A2). Part B: the 4th node held by an `--exclusive` `sleep HOLD` job (only 3 nodes usable);
`--nodes 3` (B1) and `--nodes 2-3` (B2) each start on the 3 free nodes, and rank 1's process is SIGKILLed once the
first checkpoint exists: the fixed job waits for a third node (the holder's end), the range goes on at once on 2.
Each job is rendered with `hpc-train render` and submitted with sbatch (MNIST from ../shared/data/mnist). Prints
one JSON line per job and a table; keeps the jobs' folder (printed first). Figures: BENCHMARKS.md, "Node ranges".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hpc_train.localslurm import control  # noqa: E402
from hpc_train.localslurm.spec import LocalCluster  # noqa: E402
from hpc_train.runs.metrics import read_metrics  # noqa: E402
from hpc_train.runs.attempts import recorded  # noqa: E402
from hpc_train.runs.state import read_state  # noqa: E402
from tests.e2e.jobs import FINAL_STATES, job_state, rank_pid  # noqa: E402
from tests.fake_slurm import without_slurm  # noqa: E402

CLUSTER = LocalCluster(Path("/tmp/hpc-train-bench-range"), nodes="rg[1-4]", cpus=4, controller_port=7117)
MNIST = ROOT.parent / "shared" / "data" / "mnist"
# As tests/e2e/test_node_ranges.py: 10 steps an epoch (2,400 images, a global batch of 240), a save every 3 s.
SMALL = ("--set", "train_images=2400", "--set", "validation_images=500", "--set", "checkpoint_minutes=0.05",
         "--set", "steps_per_execution=2", "--set", "global_batch=240")


def job_env(cluster: LocalCluster) -> dict[str, str]:
    return {**without_slurm(), **control.slurm_env(cluster), "HPC_TRAIN_HOME": str(ROOT),
            "HPC_TRAIN_DATA_DIR": str(MNIST), "SLURM_CONF": str(cluster.conf)}


def hold(env: dict[str, str], nodes: str, seconds: int) -> tuple[str, float]:
    """An exclusive job that holds `nodes` for `seconds`, once running; its id and when it ends (monotonic)."""
    count = len(subprocess.run(["scontrol", "show", "hostnames", nodes], env=env, capture_output=True, text=True,
                               check=True).stdout.split())
    holder = subprocess.run(["sbatch", "--parsable", "--exclusive", "-N", str(count), "-w", nodes, "-o", "/dev/null",
                             "--wrap", f"sleep {seconds}"], env=env, capture_output=True, text=True,
                            check=True).stdout.strip()
    while job_state(holder, env)[0] != "RUNNING":
        time.sleep(0.2)
    return holder, time.monotonic() + seconds


def submit(env: dict[str, str], workdir: Path, nodes: str, batch: int, epochs: int) -> tuple[str, float]:
    script = workdir / f"job-{nodes}.sbatch"
    subprocess.run([sys.executable, "-m", "hpc_train", "render", "--nodes", nodes, "--name", "bench", "-o",
                    str(script), "--set", f"epochs={epochs}", "--set", f"batch_size={batch}",
                    "--set", f"data_dir={MNIST}", *SMALL], cwd=workdir, env=env, check=True, capture_output=True,
                   text=True)
    submitted = time.monotonic()
    job = subprocess.run(["sbatch", "--parsable", str(script)], cwd=workdir, env=env, capture_output=True,
                         text=True, check=True).stdout.strip().split(";")[0]
    return job, submitted


def run_dir(workdir: Path, job: str) -> Path | None:
    found = list(workdir.glob(f"runs/*-{job}"))
    return found[0] if found else None


def first_checkpoint(workdir: Path, job: str, env: dict[str, str], timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and job_state(job, env)[0] not in FINAL_STATES:
        run = run_dir(workdir, job)
        if run is not None and list((run / "checkpoints").glob("ckpt-*.index")):
            return
        time.sleep(0.3)
    raise SystemExit(f"job {job}: no checkpoint")


def kill_rank(job: str, rank: int) -> float:
    pid = rank_pid(job, rank, lambda comm, cmdline: comm.startswith(("python", "hpc-train")))
    if pid is None:
        raise SystemExit(f"rank {rank} of job {job} not found")
    os.kill(pid, 9)
    return time.monotonic()


def wait_end(job: str, env: dict[str, str], timeout: float = 900) -> tuple[str, float]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = job_state(job, env)[0]
        if state in FINAL_STATES:
            return state, time.monotonic()
        time.sleep(0.5)
    subprocess.run(["scancel", job], env=env)
    return "TIMEOUT", time.monotonic()


def slurm_log(workdir: Path, job: str) -> str:
    logs = list(workdir.glob(f"slurm-*-{job}.out"))
    return logs[0].read_text() if logs else ""


def result(label: str, workdir: Path, job: str, submitted: float, ended: float, state: str,
           extra: dict | None = None) -> dict:
    run = run_dir(workdir, job)
    metrics = read_metrics(run) if run is not None else {}
    log = slurm_log(workdir, job)
    # Each attempt's start line: `hpc-train: job 6 (restart 1) on rg[1,3], 2 tasks, on 2 of 2-3 nodes; ...`.
    sizes = [f"{tasks} tasks on {nodes}" for nodes, tasks in
             re.findall(r"hpc-train: job \d+(?: \(restart \d+\))? on (\S+), (\d+) tasks[,;]", log)]
    # A retry's cost: from the failure to the next attempt's start, and the steps trained again.
    retries = [(attempt.get("seconds_lost"), attempt.get("steps_redone"))
               for attempt in (recorded(read_state(run)) if run is not None else [])]
    row = {"label": label, "job": job, "state": state, "seconds": round(ended - submitted, 1), "retries": retries,
           "final_val_accuracy": metrics.get("totals", {}).get("final_val_accuracy"),
           "epochs": len(metrics.get("epochs", [])), "sizes": sizes, **(extra or {})}
    print(json.dumps(row), flush=True)
    return row


def compare(env: dict[str, str], workdir: Path, jobs: tuple[tuple[str, str, int], ...], held: str,
            hold_seconds: int, epochs: int, lose_a_rank: bool) -> list[dict]:
    """Each (label, --nodes, batch a replica) in turn, submitted once a fresh holder of `held` runs; with
    `lose_a_rank`, rank 1 is killed as soon as the job's first checkpoint exists."""
    rows = []
    for label, nodes, batch in jobs:
        holder, hold_ends = hold(env, held, hold_seconds)
        job, submitted = submit(env, workdir, nodes, batch, epochs)
        extra: dict = {"nodes": nodes}
        if lose_a_rank:
            first_checkpoint(workdir, job, env)
            killed = kill_rank(job, 1)
            extra |= {"killed_at": round(killed - submitted, 1), "hold_left_at_kill": round(hold_ends - killed, 1)}
        state, ended = wait_end(job, env)
        subprocess.run(["scancel", holder], env=env)
        rows.append(result(label, workdir, job, submitted, ended, state, extra))
        if lose_a_rank and not rows[-1]["retries"]:  # an epoch is ~0.5 s here: the kill can come after the last
            print(f"{label}: the kill came too late to be retried; give more --epochs-b", flush=True)
        while job_state(holder, env)[0] not in FINAL_STATES | {"UNKNOWN"}:
            time.sleep(0.5)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| job | request | submit to result | final val accuracy | epochs | each attempt | retry: lost, redone |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        accuracy = row["final_val_accuracy"]
        lines.append(f"| {row['label']} | `--nodes {row['nodes']}` | {row['seconds']:.0f} s | "
                     f"{accuracy if accuracy is None else f'{accuracy:.4f}'} | {row['epochs']} | "
                     f"{'; '.join(row['sizes']) or '-'} | "
                     f"{'; '.join(f'{lost:.0f} s, {redone} steps' for lost, redone in row['retries']) or '-'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("a", "b", "both"), default="both")
    parser.add_argument("--hold-seconds", type=int, default=150)
    parser.add_argument("--epochs-a", type=int, default=3)
    parser.add_argument("--epochs-b", type=int, default=60)
    parser.add_argument("--keep-up", action="store_true", help="leave the cluster up afterwards")
    args = parser.parse_args()
    cluster = control.placed(CLUSTER)
    control.up(cluster)
    env = job_env(cluster)
    rows = []
    try:
        workdir = Path(tempfile.mkdtemp(prefix="bench-range-"))  # kept: the jobs' logs and runs, to look into
        print(f"jobs in {workdir}", flush=True)
        if args.part in ("a", "both"):
            rows += compare(env, workdir, (("A1", "4", 60), ("A2", "2-4", 60)), "rg[1-2]", args.hold_seconds,
                            args.epochs_a, lose_a_rank=False)
        if args.part in ("b", "both"):
            rows += compare(env, workdir, (("B1", "3", 80), ("B2", "2-3", 80)), "rg4", args.hold_seconds,
                            args.epochs_b, lose_a_rank=True)
    finally:
        if not args.keep_up:
            control.down(cluster)
    print(table(rows))


if __name__ == "__main__":
    main()
