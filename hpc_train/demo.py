"""The main job, end to end: submit slurm/mnist_2node.sh, show its progress, print the result.

    python -m hpc_train.demo [--script slurm/mnist_2node.sh] [-- --set epochs=3]

Run by env/demo.sh after the environment and (if needed) the local cluster are up.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from hpc_train.errors import HpcTrainError
from hpc_train.runs.folders import folders_of
from hpc_train.runs.metrics import read_metrics
from hpc_train.runs.views import demo_lines
from hpc_train.slurm.client import SlurmClient
from hpc_train.slurm.follow import follow, job_info


def report(job_id: str, state: str, code: str, log: Path, started: float) -> int:
    folder = next(iter(folders_of(job_id)), None)
    metrics = read_metrics(folder) if folder is not None else {}
    print("\n".join(demo_lines(job_id, state, code, log, time.monotonic() - started, folder, metrics)))
    return 0 if state == "COMPLETED" else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hpc_train.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--script", type=Path, default=Path("slurm/mnist_2node.sh"))
    parser.add_argument("train_args", nargs="*", help="passed to the job script (after --)")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    started = time.monotonic()
    try:
        job_id = SlurmClient.local(env).submit_script(str(args.script), args.train_args)
    except HpcTrainError as error:
        print(f"hpc-train demo: error: {error}", file=sys.stderr)
        return 2
    log = Path(job_info(job_id, SlurmClient.local(env)).get("StdOut") or f"slurm-{job_id}.out")
    print(f"hpc-train demo: submitted {args.script} as job {job_id}; following {log}", flush=True)
    state, code = follow(job_id, log, SlurmClient.local(env), show=lambda line: print(f"  {line}", flush=True))
    return report(job_id, state, code, log, started)


if __name__ == "__main__":
    sys.exit(main())
