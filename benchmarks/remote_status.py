"""`hpc-train status ID --remote NAME` over a warm shared connection against `ssh HOST 'cd WORKDIR && SETUP &&
hpc-train status ID'` typed by hand (a fresh connection each), interleaved, on this machine: the tests' local
Slurm cluster as the cluster, the tests' sshd (127.0.0.1) as its login node. Root; run under the heavy lock.

    python benchmarks/remote_status.py [--repetitions N]

Prints a section for BENCHMARKS.md (medians with min-max). On 127.0.0.1 a connection costs no network round
trip, so this is the least the shared connection can save: over a real network each saved handshake is one to
three round trips more.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hpc_train.localslurm import control  # noqa: E402
from tests.e2e.conftest import TEST_CLUSTER  # noqa: E402
from tests.sshd import GOOD, hpc_train, laptop_env, start, stop  # noqa: E402


def timed(argv: list[str], env: dict[str, str] | None, cwd: Path) -> float:
    started = time.perf_counter()
    result = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0 or "held" not in result.stdout:
        raise SystemExit(f"{shlex.join(argv[:3])}... failed: {result.stderr or result.stdout}")
    return elapsed


def spread(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} ms ({min(values) * 1000:.0f}-{max(values) * 1000:.0f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=20)
    args = parser.parse_args()
    was_up = all(control.status(TEST_CLUSTER).values())
    control.up(TEST_CLUSTER)
    folder = Path(tempfile.mkdtemp(prefix="bench-remote-"))
    process, server = start(folder)
    try:
        laptop, work = laptop_env(server, folder / "home"), folder / "work"
        setup = server.setup(f"SLURM_CONF={shlex.quote(str(TEST_CLUSTER.conf))}")
        hpc_train(laptop, "remote", "add", "c", "--host", GOOD, "--workdir", str(work), "--setup", setup, cwd=folder)
        by_hand = ["ssh", "-F", str(server.client_config), "-o", "ControlMaster=no", "-o", "ControlPath=none", GOOD]
        submitted = subprocess.run([*by_hand, f"mkdir -p {shlex.quote(str(work))} && cd {shlex.quote(str(work))} && "
                                    f"{setup} && hpc-train submit --nodes 1 --name held --hold -- python -c pass"],
                                   capture_output=True, text=True, check=True)
        job = submitted.stdout.strip()
        remote = [sys.executable, "-m", "hpc_train", "status", job, "--remote", "c"]
        typed = [*by_hand, f"cd {shlex.quote(str(work))} && {setup} && hpc-train status {job}"]
        timed(remote, laptop, folder)  # opens the shared connection (and probes the remote once)
        warm, fresh = [], []
        for _ in range(args.repetitions):
            warm.append(timed(remote, laptop, folder))
            fresh.append(timed(typed, None, folder))
        subprocess.run([*by_hand, f"scancel {job}"], capture_output=True)
    finally:
        stop(process, server)
        if not was_up:
            control.down(TEST_CLUSTER)
    cpu = next((line.split(":", 1)[1].strip() for line in subprocess.run(
        ["lscpu"], capture_output=True, text=True).stdout.splitlines() if line.startswith("Model name")), "?")
    print(f"CPU: {cpu}; {args.repetitions} repetitions, interleaved\n")
    print("| command | median (min-max) |\n|---|---|")
    print(f"| `hpc-train status ID --remote NAME`, warm shared connection | {spread(warm)} |")
    print(f"| `ssh HOST 'cd WORKDIR && SETUP && hpc-train status ID'`, a fresh connection | {spread(fresh)} |")
    print(f"\nratio (by hand / --remote): {statistics.median(fresh) / statistics.median(warm):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
