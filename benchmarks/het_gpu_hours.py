"""GPU hours a heterogeneous parameter-server job saves against today's one-group layout, from sacct.

For each shape (K ps, W workers, G GPUs per node) it submits, side by side on a local cluster with accounting,
  today: `submit --strategy parameter_server --nodes N --gpus-per-node G --num-ps K`, N the fewest nodes that
         give at least W workers (every rank, chief and ps included, holds a GPU slot), and
  het:   `submit ... --nodes ceil(W/G) --gpus-per-node G --partition gpuG --ps-partition cpu --num-ps K`,
each running `sleep SECONDS` on every rank, then reads every component's AllocTRES (gres/gpu) and ElapsedRaw from
`sacct -X` and prints a Markdown table: GPUs booked, GPU hours booked, and per 24 h of training the GPU hours saved.

    hpc-train cluster up --dir /tmp/hpc-train-bench-het --port 7517 --cpus 8 --accounting \\
        --partition cpu:bc[1-2]:0 --partition gpu2:bg[1-4]:2 --partition gpu4:bh[1-3]:4 --partition gpu8:bi[1-2]:8
    SLURM_CONF=/tmp/hpc-train-bench-het/slurm.conf python benchmarks/het_gpu_hours.py
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple


class Shape(NamedTuple):
    num_ps: int
    workers: int
    gpus_per_node: int


SHAPES = (Shape(2, 4, 2), Shape(1, 4, 2), Shape(2, 8, 4), Shape(4, 8, 8))
SECONDS = 20


def today_nodes(shape: Shape) -> int:
    """The fewest nodes of one group that give W workers when the chief and K ps each take a GPU slot too."""
    return math.ceil((1 + shape.num_ps + shape.workers) / shape.gpus_per_node)


def submit(workdir: str, args: list[str]) -> str:
    result = subprocess.run([sys.executable, "-m", "hpc_train", "submit", "--strategy", "parameter_server",
                             "--signal-seconds", "0", *args, "--", "sleep", str(SECONDS)],
                            cwd=workdir, capture_output=True, text=True, check=True)
    return result.stdout.splitlines()[0]


def booked(job_id: str) -> tuple[int, int]:
    """(GPUs, GPU-seconds) sacct accounted to the job, over all its components."""
    text = subprocess.run(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "JobID,AllocTRES,ElapsedRaw,State"],
                          capture_output=True, text=True, check=True).stdout
    gpus = seconds = 0
    for line in text.splitlines():
        _, tres, elapsed, _ = line.split("|")
        count = int(match.group(1)) if (match := re.search(r"gres/gpu=(\d+)", tres)) else 0
        gpus += count
        seconds += count * int(elapsed or 0)
    return gpus, seconds


def wait(job_ids: list[str]) -> None:
    while subprocess.run(["squeue", "-h", "-j", ",".join(job_ids)], capture_output=True, text=True).stdout.strip():
        time.sleep(2)
    time.sleep(3)  # slurmdbd takes the last records a moment after the jobs end


def main() -> None:
    workdir = tempfile.mkdtemp(prefix="hpc-train-bench-het-")
    jobs = []
    for shape in SHAPES:
        common = ["--gpus-per-node", str(shape.gpus_per_node), "--partition", f"gpu{shape.gpus_per_node}",
                  "--num-ps", str(shape.num_ps)]
        today = submit(workdir, ["--nodes", str(today_nodes(shape)), *common])
        het = submit(workdir, ["--nodes", str(math.ceil(shape.workers / shape.gpus_per_node)), *common,
                               "--ps-partition", "cpu"])
        jobs.append((shape, today, het))
    wait([job for _, today, het in jobs for job in (today, het)])
    print("| chief + ps, workers, GPUs a node | today: nodes, GPUs booked | heterogeneous: GPUs booked "
          "| GPU hours booked in the run (today / het) | GPU hours saved per 24 h of training |")
    print("|---|---|---|---|---|")
    for shape, today, het in jobs:
        (today_gpus, today_seconds), (het_gpus, het_seconds) = booked(today), booked(het)
        saved = (today_gpus - het_gpus) * 24
        print(f"| 1 + {shape.num_ps}, {shape.workers}, {shape.gpus_per_node} | {today_nodes(shape)}, {today_gpus} "
              f"| {het_gpus} | {today_seconds / 3600:.3f} / {het_seconds / 3600:.3f} "
              f"| {saved} ({100 * (today_gpus - het_gpus) / today_gpus:.0f}%) |")


if __name__ == "__main__":
    os.environ.setdefault("SLURM_CONF", "/tmp/hpc-train-bench-het/slurm.conf")
    main()
