"""Cancel a job (scancel), by its id.

    hpc-train cancel JOBID
    hpc-train cancel JOBID_I      # one trial of a packed sweep (submit --pack): the others go on
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
    if record.is_element and record.pack is not None:  # a step in the pack's job, not a job: its scheduler ends it
        from pathlib import Path

        from hpc_train.runs.packed import request_cancel

        request_cancel(Path(record.folder))
        print(f"hpc-train cancel: asked packed sweep {record.sweep} to end trial {record.job_id} ({record.name}); "
              "the other trials go on")
        return 0
    problem = SlurmClient.local(os.environ).cancel([record.job_id])
    if problem is not None:
        raise HpcTrainError(f"scancel {record.job_id} failed: {problem}")
    print(f"hpc-train cancel: asked Slurm to cancel job {record.job_id} ({record.name})")
    return 0
