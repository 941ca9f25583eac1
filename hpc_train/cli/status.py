"""Show a job's state, nodes, elapsed time and last progress line (the newest job by default).

    hpc-train status [JOBID]

Reads sacct where Slurm keeps accounting; elsewhere scontrol or squeue, and says so.
"""

from __future__ import annotations

import argparse
from pathlib import Path

TYPE_CHECKING = False  # (typing itself costs start-up)
if TYPE_CHECKING:
    from hpc_train.runs.folders import JobRecord
    from hpc_train.slurm.client import SlurmClient



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", nargs="?", default=None, metavar="JOBID", help="default: the newest job here")


def attempt_lines(folder: Path) -> list[str]:
    """The job's history of failures, retries and requeues (state.json's attempts), a line each."""
    import yaml

    from hpc_train.runs import attempts
    from hpc_train.injob.epilogue import DEFAULT_MAX_RETRIES
    from hpc_train.runs.state import read_state

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


def element_progress(folder: Path) -> tuple[str, str, int]:
    """(epoch, last validation figure, retries) of a sweep element's run folder, "-" for what it has not yet."""
    import json

    from hpc_train.runs import attempts

    try:
        metrics = json.loads((folder / "metrics.json").read_text())
    except (OSError, ValueError):
        metrics = {}
    epochs = metrics.get("epochs") or []
    total = (metrics.get("config") or {}).get("epochs")
    epoch = f"{len(epochs)}/{total}" if epochs and total else (str(len(epochs)) if epochs else "-")
    last = epochs[-1] if epochs else {}
    name = next((key for key in ("val_accuracy", "val_loss") if key in last),
                next((key for key in last if key.startswith("val_")), None))
    figure = f"{name} {last[name]:.4f}" if name and isinstance(last.get(name), (int, float)) else "-"
    return epoch, figure, attempts.retries_used(attempts.history(folder))


def pruned_or(state: str, folder: Path) -> str:
    """Slurm's state of a sweep element, or "pruned@E" when it stopped itself at epoch E (state.json)."""
    from hpc_train.runs.state import read_state

    run = read_state(folder)
    return f"pruned@{run.get('epoch')}" if run.get("state") == "pruned" else state.lower()


def sweep_lines(record: JobRecord, states: dict[int, str]) -> list[str]:
    """A sweep as status shows it: the counts, then a row per element (its values, state, epoch, figure, retries)."""
    from collections import Counter

    from hpc_train.login.sweep import Sweep, table

    elements = record.elements or []
    more = [["STATE", "EPOCH", "LAST VALIDATION", "RETRIES"]]
    for index in range(len(elements)):
        folder = Path(f"{record.folder}_{index}")
        epoch, figure, retries = element_progress(folder)
        more.append([pruned_or(states.get(index, "UNKNOWN"), folder), epoch, figure, str(retries)])
    counts = Counter(row[0].split("@")[0] for row in more[1:])
    shown = ", ".join(f"{count} {state}" for state, count in counts.most_common())
    rows = table(Sweep(tuple(elements[0]) if elements else (), tuple(elements)), more)
    return [f"sweep {record.job_id} ({record.name}): {len(elements)} elements: {shown}", *(f"  {row}" for row in rows),
            f"  folders: {record.folder}_INDEX/ (hpc-train logs {record.job_id}_INDEX)"]


def _sweep_status(record: JobRecord, slurm: SlurmClient) -> int:
    from hpc_train.slurm.follow import element_states

    print("\n".join(sweep_lines(record, element_states(record.job_id, len(record.elements or []), slurm))))
    return 0


def run(args: argparse.Namespace) -> int:
    import os

    from hpc_train.slurm.client import SlurmClient
    from hpc_train.slurm.follow import FINAL_STATES, PROGRESS, accounted_state, job_info, job_state
    from hpc_train.runs.folders import find_record, rank_log

    record = find_record(args.job)
    slurm = SlurmClient.local(os.environ)
    if record.is_sweep:
        return _sweep_status(record, slurm)
    accounted = accounted_state(record.job_id, slurm)
    info = job_info(record.job_id, slurm)
    if accounted is not None:
        state, code, elapsed, requeues = accounted.state, accounted.exit_code, accounted.elapsed, accounted.requeues
        source = "sacct"
    else:
        state, code = job_state(record.job_id, slurm, info)
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
        from hpc_train.slurm.pending import reason_in_words

        print(f"  waiting: {reason_in_words(info['Reason'])}")
    print(f"  elapsed: {elapsed}")
    print(f"  last:    {last}")
    print(f"  folder:  {record.folder}")
    return 0
