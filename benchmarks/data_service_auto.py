"""`--data-workers auto` on an input-bound job: how many workers it settles on, and how soon (issue 47's evidence).

The input-bound task of benchmarks/data_service_input_bound.py (upscaled MNIST, heavy per-example augmentation), one
rank, `hpc-train submit --data-workers auto` on the same local Slurm cluster of one node (4 CPUs declared, so that
the job, asked with `--exclusive`, may hold a rank and up to 3 workers), pinned as that benchmark pins its `served`
arm: the rank to one core, everything else of the job (the dispatcher, every data worker, the job body) to the
other. So the first worker lifts the rank's starvation as far as one core of input can, and a second worker, on
the same core, adds nothing: `auto` should add it (the share is over 10%), see that it did not help (the share fell
by under 3 points, and a step's average time by under 10%), and stop there. For each run it prints every sizing line of the job body with the seconds since
the job started, the size reached and why (data_service.json's `auto`), and the images/s and input share of each
epoch (metrics.json, the ranks' ledger). Each run is a job of its own (`--runs 2`: twice, one after the other); a
requeue's start at the size kept is tested (tests/injob/test_servicesizer.py, the e2e tests), not timed here.

    .venv/bin/python benchmarks/data_service_auto.py [--runs 2] [--epochs 5] [--work 6]

As root (the local cluster); MNIST from ../shared/data/mnist or --data-dir.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from data_service_input_bound import (DATA, FINAL, Pinner, bench_cluster, folder_of, job_state,  # noqa: E402
                                      logs, submit)

SIZING = re.compile(r"^hpc-train: data workers .*$", re.M)


def epoch_rows(metrics: Mapping[str, Any], ranks: Mapping[str, Any]) -> list[str]:
    """A line per epoch: its images/s (metrics.json) and the input share the chief's ledger measured for it (the
    ledger keeps the last few epochs: '-' for an older one) (pure)."""
    shares = {epoch["epoch"]: float(epoch["input_share"]) for epoch in ranks.get("epochs", [])
              if "input_share" in epoch and "epoch" in epoch}
    rows = []
    for epoch in metrics.get("epochs", []):
        rate = epoch["images"] / epoch["training_seconds"] if epoch.get("training_seconds") else 0.0
        share = f"{shares[epoch['epoch']]:.0%}" if epoch["epoch"] in shares else "-"
        rows.append(f"epoch {epoch['epoch']}: {rate:.0f} images/s, input share {share}")
    return rows


def one_run(env: Mapping[str, str], workdir: Path, number: int, args: argparse.Namespace, conf: str) -> None:
    name = f"auto-r{number}"
    job = submit(env, workdir, name, args, 0, ["--data-workers", "auto", "--exclusive"])
    folder = folder_of(workdir, name, job)
    pinner = Pinner(job, conf, args.nice)
    pinner.start()
    started, seen, deadline = None, 0, time.monotonic() + args.job_timeout
    try:
        while (state := job_state(job, env)) not in FINAL:
            if time.monotonic() > deadline:
                sys.exit(f"job {job} did not end within {args.job_timeout:.0f} s; its folder: {folder}")
            if started is None and state == "RUNNING":
                started = time.monotonic()
            said = SIZING.findall(logs(folder))
            for line in said[seen:]:  # each sizing line, stamped as it appears (polled every 0.2 s)
                print(f"  {time.monotonic() - (started or time.monotonic()):5.1f} s: {line}", flush=True)
            seen = len(said)
            time.sleep(0.2)
    finally:
        pinner.stopping.set()
    record = json.loads((folder / "data_service.json").read_text()).get("auto", {})
    metrics = json.loads((folder / "metrics.json").read_text())
    ranks = json.loads(next(folder.glob(".ledger/ranks-*.json")).read_text()) if list(
        folder.glob(".ledger/ranks-*.json")) else {}
    print(f"run {number}: job {job} {state}; auto: {record.get('workers')} worker(s), "
          f"{record.get('settled') or 'not settled'}; CPU seconds: the rank {pinner.cpu_seconds('rank'):.0f}, the "
          f"data service {pinner.cpu_seconds('service'):.0f}; load {os.getloadavg()[0]:.1f}", flush=True)
    for row in epoch_rows(metrics, ranks):
        print(f"  {row}", flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--work", type=int, default=6, help="blur passes per example (INPUT_BOUND_WORK)")
    parser.add_argument("--data-dir", default=str(DATA))
    parser.add_argument("--job-timeout", type=float, default=600.0)
    parser.add_argument("--nice", type=int, default=0)
    args = parser.parse_args(argv)
    from hpc_train.localslurm import control

    cluster, env = bench_cluster(args, "data_service_auto")
    try:
        workdir = Path(tempfile.mkdtemp(prefix="hpc-train-bench-auto-"))
        for number in range(1, args.runs + 1):
            one_run(env, workdir, number, args, str(cluster.conf))
    finally:
        control.down(cluster)


if __name__ == "__main__":
    main()
