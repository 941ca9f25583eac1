"""List recent jobs from the job folders here (runs/), newest first, with their current state.

    hpc-train list
"""

from __future__ import annotations

import argparse



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=20, metavar="N")


def run(args: argparse.Namespace) -> int:
    import os

    from hpc_train.follow import job_state
    from hpc_train.jobs.folders import all_records

    records = all_records()[:args.limit]
    if not records:
        print("no jobs in runs/ here")
        return 0
    print(f"{'JOBID':<12} {'NAME':<24} {'STATE':<12} {'SUBMITTED':<17} FOLDER")
    for record in records:
        state = "local" if record.job_id.startswith("local") else job_state(record.job_id, dict(os.environ))[0]
        print(f"{record.job_id:<12} {record.name[:24]:<24} {state.lower():<12} {record.submitted_text:<17} "
              f"{record.folder}")
    return 0
