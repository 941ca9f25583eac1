"""List recent jobs from the job folders here (runs/), newest first, with their current state.

    hpc-train list
"""

from __future__ import annotations

import argparse
from pathlib import Path

TYPE_CHECKING = False  # (typing itself costs start-up)
if TYPE_CHECKING:
    from hpc_train.runs.folders import JobRecord
    from hpc_train.slurm.client import SlurmClient



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=20, metavar="N")


def sweep_counts(record: JobRecord, slurm: SlurmClient) -> str:
    """A sweep's elements by state, in one word each: "2 completed, 1 running, 1 pending"."""
    from collections import Counter

    from hpc_train.slurm.follow import element_states

    states = element_states(record.job_id, len(record.elements or []), slurm)
    counts = Counter(state.lower() for state in states.values())
    return f"sweep: {', '.join(f'{count} {state}' for state, count in counts.most_common())}"


def retries_of(folder: Path) -> int:
    """How often the job was retried after a failure (its history in state.json)."""
    from hpc_train.runs import attempts

    return attempts.retries_used(attempts.history(folder))


def run(args: argparse.Namespace) -> int:
    import os

    from hpc_train.slurm.client import SlurmClient
    from hpc_train.slurm.follow import job_states
    from hpc_train.runs.folders import all_records

    records = [record for record in all_records() if not record.is_element][:args.limit]
    if not records:
        print("no jobs in runs/ here")
        return 0
    # Two calls to Slurm whatever the number of jobs (one squeue, one sacct for those it no longer queues), and
    # one squeue per sweep.
    slurm = SlurmClient.local(os.environ)
    states = job_states([record.job_id for record in records if not record.is_local and not record.is_sweep], slurm)
    states.update({record.job_id: sweep_counts(record, slurm) for record in records if record.is_sweep})
    print(f"{'JOBID':<12} {'NAME':<24} {'STATE':<22} {'SUBMITTED':<17} FOLDER")
    for record in records:
        state = "local" if record.is_local else states[record.job_id]
        retries = retries_of(Path(record.folder))
        state = f"{state} ({retries} {'retry' if retries == 1 else 'retries'})" if retries else state
        print(f"{record.job_id:<12} {record.name[:24]:<24} {state.lower():<22} {record.submitted_text:<17} "
              f"{record.folder}")
    return 0
