"""List recent jobs from the job folders here (runs/), newest first, with their current state.

    hpc-train list

Then the jobs submitted from here to remotes (submit --remote), each with its remote: status, logs, cancel and pull
of its id follow it there.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=20, metavar="N")


def run(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from hpc_train.remote.sent import list_lines
    from hpc_train.runs import views
    from hpc_train.runs.folders import all_records
    from hpc_train.slurm.client import SlurmClient
    from hpc_train.slurm.follow import element_states, job_states

    records = views.listed(all_records(), args.limit)
    sent = list_lines(os.environ)  # the jobs sent to remotes from here: status JOBID follows each
    if not records:
        print("\n".join(["no jobs in runs/ here", *sent]))
        return 0
    # Two calls to Slurm whatever the number of jobs (one squeue, one sacct for those it no longer queues), and
    # one squeue per sweep.
    slurm = SlurmClient.local(os.environ)
    states = job_states([record.job_id for record in records if not record.is_local and not record.is_sweep], slurm)
    states.update({record.job_id: views.sweep_counts(element_states(record.job_id, len(record.elements or []), slurm))
                   for record in records if record.is_sweep and record.pack is None})
    from hpc_train.runs import packed  # a packed sweep's trials are steps of one job: its pack's state says

    states.update({record.job_id: views.sweep_counts(packed.slurm_states(packed.read_pack_state(Path(record.folder)),
                                                                         len(record.elements or [])))
                   for record in records if record.is_sweep and record.pack is not None})
    runs = {record.job_id: views.read_run(Path(record.folder)) for record in records}
    print("\n".join([*views.list_lines(records, states, runs), *sent]))
    return 0
