"""Print a job's log for one rank (stdout, then stderr), or follow it while the job runs.

    hpc-train logs JOBID [--rank R] [--follow]
"""

from __future__ import annotations

import argparse



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", metavar="JOBID")
    parser.add_argument("--rank", type=int, default=0, metavar="R", help="default 0, the chief")
    parser.add_argument("--follow", "-f", action="store_true", help="keep printing until the job ends")


def run(args: argparse.Namespace) -> int:
    import os
    import sys
    import time

    from hpc_train.errors import HpcTrainError
    from hpc_train.slurm.client import SlurmClient
    from hpc_train.slurm.follow import FINAL_STATES, job_state
    from hpc_train.runs.folders import find_record, rank_log

    record = find_record(args.job)
    if not 0 <= args.rank < record.tasks:
        raise HpcTrainError(f"--rank {args.rank}: job {record.job_id} has ranks 0-{record.tasks - 1}")
    out, err = rank_log(record, args.rank, "out"), rank_log(record, args.rank, "err")
    if not args.follow:
        for path in (out, err):
            if path.is_file():
                sys.stdout.write(path.read_text(errors="replace"))
        return 0
    shown = 0
    while True:
        finished = job_state(record.job_id, SlurmClient.local(os.environ))[0] in FINAL_STATES | {"UNKNOWN"}
        text = out.read_text(errors="replace") if out.is_file() else ""
        sys.stdout.write(text[shown:])
        sys.stdout.flush()
        shown = len(text)
        if finished:
            return 0
        time.sleep(1)
