"""Print a job's log for one rank (stdout, then stderr), or follow it while the job runs; for a sweep's id, the
last lines of each element's.

    hpc-train logs JOBID [--rank R] [--follow]
    hpc-train logs ARRAYID [--rank R]      # each element's last lines; ARRAYID_I for one element's whole log
    hpc-train logs JOBID --stacks          # every rank's Python stacks, of each attempt that hung
    hpc-train logs JOBID --job             # the job's own log: its start, attempts, retries
                                           # (runs/NAME-JOBID/slurm-NAME-JOBID.out; docs/jobs.md)
"""

from __future__ import annotations

import argparse

TYPE_CHECKING = False  # (typing itself costs start-up)
if TYPE_CHECKING:
    from hpc_train.runs.folders import JobRecord

TAIL = 5  # lines of each element's log that `logs ARRAYID` shows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", metavar="JOBID")
    parser.add_argument("--rank", type=int, default=0, metavar="R", help="default 0, the chief")
    parser.add_argument("--follow", "-f", action="store_true", help="keep printing until the job ends")
    parser.add_argument("--job", action="store_true", dest="job_log",
                        help="the job's own log (its batch script's: the start, each attempt, retries; "
                             "runs/NAME-JOBID/slurm-NAME-JOBID.out), not a rank's")
    parser.add_argument("--stacks", action="store_true",
                        help="every rank's Python stacks (all threads), of each attempt the watchdog found hung")


def run(args: argparse.Namespace) -> int:
    import os
    import sys
    import time

    from hpc_train.errors import HpcTrainError
    from hpc_train.slurm.client import SlurmClient
    from hpc_train.slurm.follow import FINAL_STATES, job_state
    from hpc_train.runs.folders import find_record, rank_text

    record = find_record(args.job)
    if record.is_sweep:
        if args.follow:
            raise HpcTrainError(f"--follow takes one element of sweep {record.job_id}: hpc-train logs "
                                f"{record.job_id}_I --follow (I from 0 to {len(record.elements or []) - 1})")
        print("\n".join(sweep_tails(record, args.rank)))
        return 0
    if args.stacks:
        return print_stacks(record)
    if args.job_log:
        return print_job_log(record)
    if not 0 <= args.rank < record.tasks:
        raise HpcTrainError(f"--rank {args.rank}: job {record.job_id} has ranks 0-{record.tasks - 1}")
    if not args.follow:
        sys.stdout.write(rank_text(record, args.rank) or "")
        return 0
    shown = 0
    while True:
        finished = job_state(record.job_id, SlurmClient.local(os.environ))[0] in FINAL_STATES | {"UNKNOWN"}
        text = rank_text(record, args.rank) or ""
        sys.stdout.write(text[shown:])
        sys.stdout.flush()
        shown = len(text)
        if finished:
            return 0
        time.sleep(1)


def print_job_log(record: JobRecord) -> int:
    """The job's own log, each file under its name (runs/joblog.py finds it, however the job was submitted); one
    line naming where it looked when there is none yet."""
    from hpc_train.runs.joblog import job_log, job_log_places

    found = job_log(record)
    if not found:
        print(f"job {record.job_id}: no log of its own yet (looked for {', '.join(map(str, job_log_places(record)))})")
    for path in found:
        try:
            text = path.read_text(errors="replace").rstrip()
        except OSError as error:  # gone or unreadable since it was found
            print(f"==> {path} <==\n(cannot be read: {error.strerror or error})\n")
            continue
        print(f"==> {path} <==\n{text}\n")
    return 0


def print_stacks(record: JobRecord) -> int:
    """The stacks files of the run folder, each under its name; one line when there are none."""
    from pathlib import Path

    from hpc_train.runs.stacks import read_stacks

    found = read_stacks(Path(record.folder))
    if not found:
        print(f"job {record.job_id}: no stacks recorded (they are, for every rank, when an attempt hangs)")
    for name, text in found:
        print(f"==> {Path(record.folder) / 'stacks' / name} <==\n{text.rstrip()}\n")
    return 0


def sweep_tails(sweep: JobRecord, rank: int) -> list[str]:
    """Each element's values and the last lines of its rank's log (or that it has none yet), then how to see one
    element's whole log."""
    from hpc_train.runs.columns import value_text
    from hpc_train.runs.folders import element_records, rank_log

    lines = []
    for index, (element, values) in enumerate(zip(element_records(sweep), sweep.elements or [])):
        shown = ", ".join(f"{key}={value_text(value)}" for key, value in values.items())
        log = rank_log(element, rank)
        text = log.read_text(errors="replace").splitlines() if log.is_file() else None
        lines.append(f"== {element.job_id} ({shown}): " + (f"{log}, last {min(TAIL, len(text))} lines" if text
                                                          is not None else "no log yet (pending?)"))
        lines += (text or [])[-TAIL:]
    return [*lines, f"(the whole log of one element: hpc-train logs {sweep.job_id}_I [--rank R])"]
