"""The main job, end to end: submit slurm/mnist_2node.sh, show its progress, print the result.

    python -m hpc_train.demo [--script slurm/mnist_2node.sh] [-- --set epochs=3]

Run by env/demo.sh after the environment and (if needed) the local cluster are up.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from hpc_train.errors import HpcTrainError
from hpc_train.slurm.client import SlurmClient
from hpc_train.slurm.follow import follow, job_info


def report(job_id: str, state: str, code: str, log: Path, started: float) -> int:
    runs = sorted(Path("runs").glob(f"*-{job_id}"))
    print(f"\nhpc-train demo: job {job_id} {state.lower()} (exit {code or '?'}) after {time.monotonic() - started:.0f} s")
    print(f"  log:     {log}")
    if runs and (runs[0] / "metrics.json").is_file():
        metrics = json.loads((runs[0] / "metrics.json").read_text())
        totals = metrics["totals"]
        print(f"  result:  validation accuracy {totals.get('final_val_accuracy', float('nan')):.4f} after "
              f"{totals['epochs']} epochs on {metrics['world_size']} tasks ({metrics['strategy']}), "
              f"{totals['seconds']:.1f} s of training at {totals['images_per_second']:.0f} images/s")
        print(f"  model:   {runs[0] / 'model.keras'}")
        print(f"  metrics: {runs[0] / 'metrics.json'}")
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
