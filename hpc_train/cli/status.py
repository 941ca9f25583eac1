"""Show a job's state, nodes, elapsed time and last progress line (the newest job by default).

    hpc-train status [JOBID]

Reads sacct where Slurm keeps accounting; elsewhere scontrol or squeue, and says so.
"""

from __future__ import annotations

import argparse
from pathlib import Path



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", nargs="?", default=None, metavar="JOBID", help="default: the newest job here")


def attempt_lines(folder: Path) -> list[str]:
    """The job's history of failures, retries and requeues (state.json's attempts), a line each."""
    import yaml

    from hpc_train.jobs import attempts
    from hpc_train.jobs.epilogue import DEFAULT_MAX_RETRIES
    from hpc_train.jobs.runstate import read_state

    history = attempts.history(folder)
    if not history:
        return []
    max_retries = read_state(folder).get("max_retries")
    if max_retries is None:
        try:
            max_retries = (yaml.safe_load((folder / "config.yaml").read_text()) or {}).get("max_retries")
        except (OSError, yaml.YAMLError, AttributeError):
            pass
    total = attempts.attempts_allowed(history, int(max_retries if isinstance(max_retries, int) else DEFAULT_MAX_RETRIES))
    return [attempts.describe(attempt, int(attempt.get("attempt", number + 1)), total)
            for number, attempt in enumerate(history)]


def run(args: argparse.Namespace) -> int:
    import os

    from hpc_train.jobs.follow import FINAL_STATES, PROGRESS, accounted_state, job_info, job_state
    from hpc_train.jobs.folders import find_record, rank_log

    record = find_record(args.job)
    env = dict(os.environ)
    accounted = accounted_state(record.job_id, env)
    info = job_info(record.job_id, env)
    if accounted is not None:
        state, code, elapsed, requeues = accounted.state, accounted.exit_code, accounted.elapsed, accounted.requeues
        source = "sacct"
    else:
        state, code = job_state(record.job_id, env, info)
        elapsed, requeues = info.get("RunTime", "?"), int(info.get("Restarts", "0") or 0)
        source = "scontrol/squeue: no Slurm accounting here"
    last = "no progress yet"
    log = rank_log(record, 0)
    if log.is_file():
        text = log.read_text(errors="replace").splitlines()
        # The trainer's progress lines; of a user's command, its last line (not submitit's own).
        lines = ([line for line in text if line.strip() and not line.startswith("submitit ")] if record.command
                 else [m.group(1) for m in map(PROGRESS.match, text) if m])
        last = lines[-1] if lines else last
    ended = state.split()[0].upper() in FINAL_STATES
    print(f"job {record.job_id} ({record.name}): {state.lower()}{f', exit {code}' if code and ended else ''} "
          f"[{source}]")
    nodes = info.get("NodeList") or (accounted.nodes if accounted else "")  # once Slurm forgot it, sacct's
    print(f"  nodes:   {nodes or 'none yet'} ({record.tasks} tasks, {record.strategy})")
    print(f"  runs:    {record.what}")
    if requeues:
        print(f"  again:   requeued {requeues} time{'s' if requeues > 1 else ''}")
    for line in attempt_lines(Path(record.folder)):
        print(f"  history: {line}")
    if state.upper() == "PENDING" and info.get("Reason"):
        from hpc_train.jobs.pending import reason_in_words

        print(f"  waiting: {reason_in_words(info['Reason'])}")
    print(f"  elapsed: {elapsed}")
    print(f"  last:    {last}")
    print(f"  folder:  {record.folder}")
    return 0
