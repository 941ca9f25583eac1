"""`submit --remote busy,free` against `submit --remote busy`: two real local Slurm clusters on this machine, each
a remote of the tests' sshd (127.0.0.1) as its login node; `busy` has every node taken by a job of
`--busy-seconds`. Root; run under the e2e lock (it uses the tests' cluster as `busy`).

    flock /tmp/hpc-train-e2e.lock python benchmarks/earliest_remote.py [--busy-seconds 90]

Prints a section for BENCHMARKS.md: the estimates line, where the job went, and how long each job waited in the
queue (Slurm's StartTime - SubmitTime).
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hpc_train.localslurm import control  # noqa: E402
from hpc_train.localslurm.spec import LocalCluster  # noqa: E402
from hpc_train.slurm.client import fields  # noqa: E402
from tests.e2e.conftest import TEST_CLUSTER  # noqa: E402
from tests.sshd import GOOD, hpc_train, laptop_env, start, stop  # noqa: E402

FREE = LocalCluster(Path("/tmp/hpc-train-slurm-places"), nodes="pl[1-2]", cpus=2, controller_port=7817,
                    gpus_per_node=0)


def slurm(cluster: LocalCluster, *argv: str) -> str:
    import os

    return subprocess.run(list(argv), env={**os.environ, **control.slurm_env(cluster)}, capture_output=True,
                          text=True, check=True).stdout


def waited(cluster: LocalCluster, job: str, timeout: float) -> float:
    """Seconds the job spent in the queue (StartTime - SubmitTime), once it started."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = fields(slurm(cluster, "scontrol", "show", "job", "-o", job))
        if shown.get("JobState") not in (None, "PENDING"):
            start, submit = (datetime.fromisoformat(shown[key]) for key in ("StartTime", "SubmitTime"))
            return (start - submit).total_seconds()
        time.sleep(1)
    raise SystemExit(f"job {job} did not start within {timeout} s")


def submit(laptop: dict[str, str], here: Path, remotes: str) -> tuple[str, list[str], float]:
    started = time.perf_counter()
    result = hpc_train(laptop, "submit", "--remote", remotes, "--nodes", "2", "--name", "probe", "--", "python",
                       "-c", "pass", cwd=here, timeout=180)
    if result.returncode != 0:
        raise SystemExit(f"submit --remote {remotes} failed: {result.stderr}")
    return result.stdout.strip(), result.stderr.splitlines(), time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy-seconds", type=int, default=90)
    args = parser.parse_args()
    up_before = {cluster.directory: all(control.status(cluster).values()) for cluster in (TEST_CLUSTER, FREE)}
    for cluster in (TEST_CLUSTER, FREE):
        control.up(cluster)
    folder = Path(tempfile.mkdtemp(prefix="bench-earliest-"))
    process, server = start(folder)
    occupier = ""
    try:
        laptop, here = laptop_env(server, folder / "home"), folder / "laptop"
        here.mkdir()
        for name, cluster in (("busy", TEST_CLUSTER), ("free", FREE)):
            setup = server.setup(f"SLURM_CONF={shlex.quote(str(cluster.conf))}")
            hpc_train(laptop, "remote", "add", name, "--host", GOOD, "--workdir", str(folder / f"work-{name}"),
                      "--setup", setup, cwd=folder)
        nodes = len(TEST_CLUSTER.node_names)
        occupier = slurm(TEST_CLUSTER, "sbatch", "--parsable", f"--nodes={nodes}", "--exclusive", "--time=3",
                         f"--wrap=sleep {args.busy_seconds}").strip()
        waited(TEST_CLUSTER, occupier, 60)
        chosen_job, said, chosen_seconds = submit(laptop, here, "busy,free")
        line = next(line for line in said if line.startswith("hpc-train: earliest start:"))
        went = next(entry.split()[0] for entry in line.split("earliest start: ", 1)[1].split(", ") if "(chosen)" in entry)
        chosen_wait = waited(FREE if went == "free" else TEST_CLUSTER, chosen_job, 120)
        busy_job, _, busy_seconds = submit(laptop, here, "busy")
        busy_wait = waited(TEST_CLUSTER, busy_job, args.busy_seconds + 120)
    finally:
        if occupier:
            slurm(TEST_CLUSTER, "scancel", occupier)
        stop(process, server)
        for cluster in (TEST_CLUSTER, FREE):
            if not up_before[cluster.directory]:
                control.down(cluster)
    print(f"busy: the tests' cluster ({nodes} nodes, all taken by an --exclusive job of {args.busy_seconds} s, --time 3); "
          f"free: {FREE.nodes}, idle\n")
    print(f"`submit --remote busy,free --nodes 2` said: `{line}`\n")
    print("| command | went to | submit took | waited in the queue |\n|---|---|---|---|")
    print(f"| `hpc-train submit --remote busy,free --nodes 2` | {went} | {chosen_seconds:.1f} s | {chosen_wait:.0f} s |")
    print(f"| `hpc-train submit --remote busy --nodes 2` | busy | {busy_seconds:.1f} s | {busy_wait:.0f} s |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
