"""How long the demo job holds its allocation after its ranks end (issue 48: under 5 s).

Submits `slurm/mnist_2node.sh --set epochs=E` (the demo job) RUNS times to a Slurm cluster (the one the
environment names: `eval "$(hpc-train cluster env)"`; MNIST from HPC_TRAIN_DATA_DIR), watches each job with
`scontrol show job` every 0.1 s, and prints, each from the job's start (seconds):

- trained: the chief's training done (fit returned; `.ledger/ranks-1.json`);
- ranks ended: the step (srun: every rank) returned to the job body (`.ledger/body-1.json`);
- body's end: the attempt's end recorded (state.json), what the ledger counts to;
- ledger: ledger.json written (its modification time), the body's last write;
- left RUNNING: the first poll that saw the job COMPLETING or done (the batch script, the body, exited);
- completed: the first poll that saw it COMPLETED (its nodes back to Slurm);

and the held-after: completed less ranks ended, and the ledger's `idle`.

    python benchmarks/held_after.py [RUNS] [EPOCHS]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POLL = 0.1


def job_state(job_id: str) -> str:
    shown = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True).stdout
    fields = dict(part.split("=", 1) for part in shown.split() if "=" in part)
    return fields.get("JobState", "UNKNOWN")


def one_run(workdir: Path, epochs: int) -> dict[str, float]:
    env = {**os.environ, "HPC_TRAIN_HOME": str(ROOT)}
    job_id = subprocess.run(["sbatch", "--parsable", str(ROOT / "slurm" / "mnist_2node.sh"), "--set",
                             f"epochs={epochs}"], cwd=workdir, env=env, capture_output=True, text=True,
                            check=True).stdout.strip().split(";")[0]
    left_running = completed = None
    while completed is None:
        state, now = job_state(job_id), time.time()
        if left_running is None and state not in ("PENDING", "RUNNING", "CONFIGURING"):
            left_running = now
        if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "UNKNOWN"):
            completed = now
            if state != "COMPLETED":
                sys.exit(f"job {job_id} ended {state}")
        time.sleep(POLL)
    [run] = list(workdir.glob(f"runs/*-{job_id}"))
    body = json.loads((run / ".ledger" / "body-1.json").read_text())
    ranks = json.loads((run / ".ledger" / "ranks-1.json").read_text())
    [ended] = json.loads((run / "state.json").read_text())["ended"]
    ledger = json.loads((run / "ledger.json").read_text())
    start = body["started"]
    return {"trained": ranks["trained"] - start, "ranks ended": body["ranks_ended"] - start,
            "body's end": ended["ended"] - start, "ledger": (run / "ledger.json").stat().st_mtime - start,
            "left RUNNING": left_running - start, "completed": completed - start,
            "held after": completed - body["ranks_ended"], "ledger idle": ledger["total"]["idle"]}


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="held-after-") as folder:
        for _ in range(runs):
            rows.append(one_run(Path(folder), epochs))
            print(" ".join(f"{name} {value:.2f}" for name, value in rows[-1].items()), flush=True)
    for name in rows[0]:
        values = sorted(row[name] for row in rows)
        print(f"{name}: median {values[len(values) // 2]:.2f} s (of {', '.join(f'{v:.2f}' for v in values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
