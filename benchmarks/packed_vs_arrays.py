"""A packed sweep against the same sweep as job arrays, on a local cluster with fake GPUs and accounting.

It brings up its own cluster (2 nodes x 4 fake GPUs, slurmdbd and MariaDB, in /tmp/hpc-train-bench-pack, nodes
pk[1-2], free ports from 7617), turns on AccountingStorageEnforce=limits,qos and gives root a QOS with
MaxJobsPerUser=2 (a site's limit on running jobs), then runs the same 8 one-GPU trials (`sleep S` in Python, S
from the swept value), one run after the other:
  pack:            submit --pack --nodes 2 --gpus-per-node 4 --trial-gpus 1 --sweep seed=...
  array, 1 GPU:    submit --nodes 1 --gpus-per-node 1 --sweep seed=...
  array, 1 node:   submit --nodes 1 --gpus-per-node 4 --sweep seed=...   (rank 0 works, ranks 1-3 exit at once)
and prints a Markdown row each: wall time from submit to the last trial's end, the GPU hours Slurm accounted
(sacct -X -D AllocTRES gres/gpu x ElapsedRaw, every element, and every record of a job Slurm resized: a pack that
gave a node back has one record before the resize and one after) and the idle GPU share (1 - the trials' own
GPU-seconds / the accounted GPU-seconds), then the pack's timeline: when its job started, each node's trials, when
each node went back and when the job ended (where its idle GPU-seconds are). It brings the cluster down at the end.
`--tenfold` runs 16 one-GPU trials whose lengths differ tenfold (4-40 s) instead, the pack against the one-GPU array.

    .venv/bin/python benchmarks/packed_vs_arrays.py [--tenfold]     # as root; a few minutes
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from statistics import mean
from pathlib import Path

from hpc_train.localslurm import control
from hpc_train.localslurm.spec import LocalCluster

CLUSTER = LocalCluster(Path("/tmp/hpc-train-bench-pack"), nodes="pk[1-2]", cpus=4, gpus_per_node=4,
                       accounting=True, controller_port=7617)
SECONDS = (20, 30, 25, 22, 28, 24, 26, 21)  # 8 trials of 20-30 s
# 16 trials of 4-40 s, in the order random.Random(48).shuffle gave (the order decides which trials end last where)
TENFOLD = (16, 40, 38, 26, 4, 20, 6, 18, 10, 32, 12, 36, 30, 24, 8, 28)
MAX_RUNNING_JOBS = 2
# Rank 0 of a trial sleeps and records when it ran; any other rank (the whole-node array's 1-3) leaves at once,
# so every trial uses one GPU whatever it was given.
TRIAL = """\
import os, sys, time
if os.environ.get("SLURM_PROCID", "0") != "0":
    sys.exit(0)
start = time.time()
time.sleep(float(sys.argv[2]))
with open(sys.argv[1], "a") as out:
    out.write(f"{start} {time.time()} {sys.argv[2]}\\n")
"""
RUNS = (
    ("packed: one job, 2 nodes x 4 GPUs, `--pack --trial-gpus 1`",
     ["--pack", "--nodes", "2", "--gpus-per-node", "4", "--trial-gpus", "1"]),
    ("job array of one-GPU elements (`--nodes 1 --gpus-per-node 1`)", ["--nodes", "1", "--gpus-per-node", "1"]),
    ("job array of whole-node elements (`--nodes 1 --gpus-per-node 4`)", ["--nodes", "1", "--gpus-per-node", "4"]),
)


def slurm(env: dict[str, str], *args: str) -> str:
    return subprocess.run(list(args), env=env, capture_output=True, text=True, check=True).stdout


def enforce_limit(env: dict[str, str]) -> str:
    """AccountingStorageEnforce=limits,qos (slurmctld restarted to read it) and root under a QOS of at most
    MAX_RUNNING_JOBS running jobs; returns what slurmctld then reports, to be shown beside the figures."""
    conf = CLUSTER_PLACED.conf
    text = conf.read_text()
    if "AccountingStorageEnforce" not in text:
        conf.write_text(text + "AccountingStorageEnforce=limits,qos\n")
    # add fails where an earlier run left them in the cluster's database: modify then sets them all the same
    subprocess.run(["sacctmgr", "-i", "add", "qos", "bench2"], env=env, capture_output=True)
    slurm(env, "sacctmgr", "-i", "modify", "qos", "bench2", "set", f"MaxJobsPerUser={MAX_RUNNING_JOBS}")
    subprocess.run(["sacctmgr", "-i", "add", "account", "bench", "cluster=hpctrain"], env=env, capture_output=True)
    subprocess.run(["sacctmgr", "-i", "add", "user", "root", "account=bench", "qos=bench2", "defaultqos=bench2"],
                   env=env, capture_output=True)
    slurm(env, "sacctmgr", "-i", "modify", "user", "root", "set", "qos=bench2", "defaultqos=bench2")
    pid = int(CLUSTER_PLACED.pid_file("slurmctld").read_text())
    os.kill(pid, 15)  # AccountingStorageEnforce is read at slurmctld's start
    while Path(f"/proc/{pid}").exists():
        time.sleep(0.2)
    subprocess.run(["slurmctld", "-f", str(conf)], env=env, check=True)
    deadline = time.monotonic() + 60
    # Until the slurmds register again their nodes are UNKNOWN, and a job asking for them is refused.
    while subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True).stdout.split() \
            != ["idle"]:
        if time.monotonic() > deadline:
            sys.exit("slurmctld did not come back with its nodes idle")
        time.sleep(0.5)
    enforce = re.search(r"AccountingStorageEnforce\s*=\s*(\S+)", slurm(env, "scontrol", "show", "config"))
    qos = slurm(env, "sacctmgr", "-n", "-P", "show", "assoc", "user=root", "format=User,QOS,DefaultQOS").split()[0]
    limit = slurm(env, "sacctmgr", "-n", "-P", "show", "qos", "bench2", "format=Name,MaxJobsPU").strip()
    return f"AccountingStorageEnforce={enforce.group(1) if enforce else '?'}; root: {qos}; qos: {limit}"


def accounting(env: dict[str, str], job_id: str) -> list[str]:
    """sacct's records of the job: every element's, and each record of a job Slurm resized (-D: without it sacct
    shows only a resized job's last, after the resize)."""
    return slurm(env, "sacct", "-X", "-D", "-n", "-P", "-j", job_id, "-o",
                 "JobID,ElapsedRaw,AllocTRES,State,Start,End,NodeList").splitlines()


def accounted(env: dict[str, str], job_id: str) -> int:
    """GPU-seconds sacct accounted to the job: every record's gres/gpu x ElapsedRaw."""
    total = 0
    for line in accounting(env, job_id):
        _, elapsed, tres, *_ = line.split("|")
        gpus = re.search(r"gres/gpu=(\d+)", tres)
        total += int(gpus.group(1)) * int(elapsed or 0) if gpus else 0
    return total


def _when(text: str) -> float:
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:  # sacct's Unknown
        return float("nan")


def timeline(env: dict[str, str], workdir: Path, job_id: str, results: Path, seconds: tuple[int, ...]) -> str:
    """The pack's timeline, in seconds from its job's start: each node's trials (start-end), when the node went
    back, the job's end; and sacct's records of it."""
    state = json.loads((workdir / "runs" / f"bench-{job_id}" / "pack-state.json").read_text())
    records = accounting(env, job_id)
    began = min(_when(line.split("|")[4]) for line in records)
    ended = max(_when(line.split("|")[5]) for line in records)
    own = {int(float(line.split()[2])): tuple(map(float, line.split()[:2])) for line in results.read_text().splitlines()}
    by_node: dict[str, list[str]] = {}
    late = []  # (the trial's own start - its step's launch, the step's end seen - the trial's own end)
    for trial in state["trials"]:
        length = seconds[trial["index"]]
        for run in trial["runs"]:
            start, end = own.get(length, (run["started"], run["ended"]))
            late.append((start - run["started"], run["ended"] - end))
            for node in run["nodes"]:
                by_node.setdefault(node, []).append(f"{run['started'] - began:.1f}-{run['ended'] - began:.1f}"
                                                    f" ({length} s)")
    back = {entry["node"]: entry["at"] - began for entry in state.get("released", [])}
    lines = [f"  {node}: trials {', '.join(sorted(spans, key=lambda span: float(span.split('-')[0])))}; "
             + (f"released at {back[node]:.1f}" if node in back else "held to the end")
             for node, spans in sorted(by_node.items())]
    first = min(run["started"] for trial in state["trials"] for run in trial["runs"]) - began
    return "\n".join([f"pack job {job_id}: {ended - began:.0f} s from its start to its end; its first step launched "
                      f"at {first:.1f} s; a trial's own start {mean(a for a, _ in late):.1f} s after its step's "
                      f"launch, the step's end seen {mean(b for _, b in late):.1f} s after the trial's own (means)",
                      *lines, *(f"  sacct: {line}" for line in records)])


def floor(seconds: tuple[int, ...]) -> tuple[float, float]:
    """The pack's GPU-seconds held against the work, and its idle share, with no overhead at all: the scheduler's own
    choices (injob/pack/core.py: where each trial goes, when a node goes back) on trials that take exactly their
    length, 2 nodes x 4 GPUs, the batch host held to the end."""
    from hpc_train.injob.pack import core

    hosts = [f"pk{number}" for number in (1, 2)]
    state = core.PackState.new(core.slots_of(hosts, 1, 4), len(seconds), None, 0)
    now, ends, gone = 0.0, {}, {}
    while True:
        state, launched = core.starts(state, now)
        ends.update({start.index: now + seconds[start.index] for start in launched})
        going = core.to_release(state, hosts, hosts[0])
        gone.update(dict.fromkeys(going, now))
        state = core.nodes_released(state, going, now)
        if not ends:
            break
        index = min(ends, key=ends.__getitem__)
        now = ends.pop(index)
        state = core.ended(state, index, 0, now)
    held = sum(4 * gone.get(node, now) for node in hosts)
    return held / sum(seconds), 1 - sum(seconds) / held


def run(env: dict[str, str], workdir: Path, label: str, args: list[str],
        seconds: tuple[int, ...]) -> tuple[str, float, float, float, str]:
    results = workdir / f"results-{len(list(workdir.glob('results-*')))}.txt"
    sweep = "seed=" + ",".join(str(s) for s in seconds)
    began = time.time()
    out = subprocess.run([sys.executable, "-m", "hpc_train", "submit", "--name", "bench", "--no-snapshot", *args,
                          "--sweep", sweep, "--", sys.executable, str(workdir / "trial.py"), str(results),
                          "{seed}"], cwd=workdir, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"submit failed: {out.stderr}")
    job_id = out.stdout.split()[0].split("_")[0]
    most_running = 0
    while queued := slurm(env, "squeue", "-h", "-j", job_id, "-o", "%T").split():
        most_running = max(most_running, queued.count("RUNNING"))
        time.sleep(1)
    time.sleep(5)  # slurmdbd takes the last records a moment after the jobs end
    spans = [tuple(map(float, line.split()[:2])) for line in results.read_text().splitlines()]
    if len(spans) != len(seconds):
        sys.exit(f"{label}: {len(spans)} trials of {len(seconds)} recorded a result (job {job_id})")
    used = sum(end - start for start, end in spans)  # one GPU each
    gpu_seconds = accounted(env, job_id)
    wall = max(end for _, end in spans) - began
    if "--pack" in args:
        print(timeline(env, workdir, job_id, results, seconds), flush=True)
    return label, wall, gpu_seconds / 3600, 1 - used / gpu_seconds, f"job {job_id}, at most {most_running} running"


def main() -> None:
    global CLUSTER_PLACED
    CLUSTER_PLACED = control.placed(CLUSTER)
    control.up(CLUSTER_PLACED)
    env = {**control.slurm_env(CLUSTER_PLACED), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    try:
        print(enforce_limit(env), flush=True)
        workdir = Path(tempfile.mkdtemp(prefix="hpc-train-bench-pack-"))
        (workdir / "trial.py").write_text(TRIAL)
        seconds, runs = (TENFOLD, RUNS[:2]) if "--tenfold" in sys.argv[1:] else (SECONDS, RUNS)
        rows = [run(env, workdir, label, args, seconds) for label, args in runs]
        print(f"trials: {len(seconds)} x 1 GPU, sleeping {seconds} s ({sum(seconds)} GPU-seconds of work)")
        ratio, idle = floor(seconds)
        shuffled = [floor(tuple(random.Random(seed).sample(seconds, len(seconds)))) for seed in range(200)]
        print(f"the pack with no overhead at all (its scheduler's choices on exact lengths): {ratio:.3f} x the work "
              f"held, {100 * idle:.1f}% idle; over 200 random orders of the same trials "
              f"{mean(ratio for ratio, _ in shuffled):.3f} x, {100 * mean(idle for _, idle in shuffled):.1f}% idle")
        pack, array = rows[0], rows[1]
        print(f"pack / one-GPU array: GPU hours {pack[2] / array[2]:.2f} x, wall time {pack[1] / array[1]:.2f} x")
        print("| run | wall time, submit to last result | GPU hours accounted (sacct AllocTRES) | idle GPU share | |")
        print("|---|---|---|---|---|")
        for label, wall, hours, idle, note in rows:
            print(f"| {label} | {wall:.0f} s | {hours:.3f} | {100 * idle:.0f}% | {note} |", flush=True)
    finally:
        control.down(CLUSTER_PLACED)


CLUSTER_PLACED = CLUSTER

if __name__ == "__main__":
    main()
