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
    from hpc_train.slurm.client import SlurmClient
    from hpc_train.runs.folders import find_record

    record = find_record(args.job)
    problem = SlurmClient.local(os.environ).cancel([record.job_id])
    if problem is not None:
        raise HpcTrainError(f"scancel {record.job_id} failed: {problem}")
    print(f"hpc-train cancel: asked Slurm to cancel job {record.job_id} ({record.name})")
    return 0
