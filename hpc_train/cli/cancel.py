"""Cancel a job (scancel), by its id.

    hpc-train cancel JOBID
"""

from __future__ import annotations

import argparse



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", metavar="JOBID")


def run(args: argparse.Namespace) -> int:
    import os

    from hpc_train.errors import HpcTrainError
    from hpc_train.follow import slurm_command
    from hpc_train.jobs.folders import find_record

    record = find_record(args.job)
    result = slurm_command(["scancel", record.job_id], os.environ)
    if result.returncode != 0:
        raise HpcTrainError(f"scancel {record.job_id} failed: {result.stderr.strip() or 'no reason given'}")
    print(f"hpc-train cancel: asked Slurm to cancel job {record.job_id} ({record.name})")
    return 0
