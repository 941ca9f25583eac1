"""Follow a submitted Slurm job: its state and its chief's progress lines, until it ends.

Works without Slurm accounting: the state comes from `scontrol show job`
(kept for MinJobAge after the end), else from `squeue`, and only then from
sacct (which remembers jobs for good, where there is accounting).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import takewhile
from pathlib import Path

from hpc_train.slurm.client import SlurmClient

FINAL_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                          "PREEMPTED", "BOOT_FAIL", "DEADLINE"})
# The chief's progress, as srun --label prints it ("0: hpc-train: epoch 2/3 ...").
PROGRESS = re.compile(r"^(?:\d+: )?(hpc-train: .*)$")


def job_info(job_id: str, slurm: SlurmClient) -> dict[str, str]:
    """`scontrol show job` as a dict (JobState, ExitCode, StdOut, ...); empty once Slurm forgot the job."""
    return slurm.show_job(job_id)


@dataclass(frozen=True)
class Accounted:
    """What sacct says of a job's latest run, and how often Slurm requeued the job."""

    state: str  # COMPLETED, FAILED, CANCELLED ("CANCELLED by 0" in sacct), ...
    exit_code: str  # "3:0": the code, then the signal
    elapsed: str
    requeues: int
    nodes: str = ""  # the latest run's nodes (a Slurm node list), "" when sacct gives none
    partition: str = ""  # the partition it ran in (of `--partition a,b`, the one it got); "" when sacct gives none


def accounted_state(job_id: str, slurm: SlurmClient) -> Accounted | None:
    """The job as sacct knows it, or None where Slurm keeps no accounting (or sacct does not know the job)."""
    return accounted_states([job_id], slurm).get(job_id)


def accounted_states(job_ids: Sequence[str], slurm: SlurmClient) -> dict[str, Accounted]:
    """The jobs sacct knows, by id, in one sacct call; empty where Slurm keeps no accounting."""
    text = slurm.accounting(job_ids)
    return parse_sacct_jobs(text) if text else {}


def parse_sacct_jobs(text: str) -> dict[str, Accounted]:
    """`sacct -X -D -n -P -o JobID,State,ExitCode,Elapsed,NodeList,Partition` of several jobs: each job's rows
    (pure)."""
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        job_id, _, rest = line.partition("|")
        leader, plus, component = job_id.strip().partition("+")
        if plus and component != "0":
            continue  # a heterogeneous job's later component: the job's state is its leader's (ID+0)
        if rest:
            rows.setdefault(leader, []).append(rest)
    parsed = {job_id: parse_sacct("\n".join(lines)) for job_id, lines in rows.items()}
    return {job_id: accounted for job_id, accounted in parsed.items() if accounted is not None}


def parse_sacct(text: str) -> Accounted | None:
    """`sacct -X -D -n -P -o State,ExitCode,Elapsed[,NodeList[,Partition]]` of one job id, oldest row first (pure)."""
    rows = [line.split("|") for line in text.splitlines() if line.strip()]
    if not rows:
        return None
    state, code, elapsed, nodes, partition = (rows[-1] + ["", "", "", "", ""])[:5]
    # The runs that ended in a requeue, the latest among them until its next run has a row of its own; a row
    # before those is an older job with the same id.
    ended = rows if state.startswith("REQUEUE") else rows[:-1]
    requeues = sum(1 for _ in takewhile(lambda row: row[0].startswith("REQUEUE"), reversed(ended)))
    return Accounted((state.split() or ["UNKNOWN"])[0], code, elapsed, requeues,
                     "" if nodes in ("None assigned", "(null)") else nodes, partition)


def job_state(job_id: str, slurm: SlurmClient, fields: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(state, exit code) of a job; ("UNKNOWN", "") when Slurm no longer knows it (or is not here).
    `fields`: its job_info when the caller has it already."""
    fields = job_info(job_id, slurm) if fields is None else fields
    if "JobState" in fields:
        return fields["JobState"], fields.get("ExitCode", "")
    queued = slurm.queued_states([job_id]).get(job_id)
    if queued:
        return queued, ""
    accounted = accounted_state(job_id, slurm)  # after MinJobAge, only accounting still knows the job
    return (accounted.state, accounted.exit_code) if accounted else ("UNKNOWN", "")


def job_states(job_ids: Sequence[str], slurm: SlurmClient) -> dict[str, str]:
    """The state of each job, in two calls whatever their number (`hpc-train list`): squeue for the jobs still
    queued, then sacct for the rest; "UNKNOWN" for a job neither knows."""
    states = slurm.queued_states(job_ids)
    gone = [job_id for job_id in job_ids if job_id not in states]
    accounted = accounted_states(gone, slurm) if gone else {}
    return {job_id: states.get(job_id) or (accounted[job_id].state if job_id in accounted else "UNKNOWN")
            for job_id in job_ids}


def follow(job_id: str, log: Path, slurm: SlurmClient, show: Callable[[str], None],
           poll_seconds: float = 1.0, timeout: float = 3600.0) -> tuple[str, str]:
    """Show state changes and progress lines until the job ends; return its final (state, exit code)."""
    last_state, read = "", 0
    deadline = time.monotonic() + timeout
    while True:
        state, code = job_state(job_id, slurm)
        if state != last_state:
            show(f"job {job_id}: {state.lower()}")
            last_state = state
        read = _show_new_progress(log, read, show)
        if state in FINAL_STATES or state == "UNKNOWN" or time.monotonic() > deadline:
            _show_new_progress(log, read, show)
            return state, code
        time.sleep(poll_seconds)


def _show_new_progress(log: Path, already: int, show: Callable[[str], None]) -> int:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return already
    complete = text[:text.rfind("\n") + 1]  # a line still being written waits for the next look
    for line in complete[already:].splitlines():
        match = PROGRESS.match(line)
        if match:
            show(match.group(1))
    return len(complete)


_ARRAY_ELEMENT = re.compile(r"^(\d+)_(?:(\d+)|\[([\d,\-]+)(?:%\d+)?\])$")


def parse_array_states(text: str, array_id: str) -> dict[int, str]:
    """Element index -> state from `squeue -o '%i %T'` lines of one array ("12_0 RUNNING", "12_[2-3%2] PENDING")."""
    states: dict[int, str] = {}
    for line in text.splitlines():
        parts = line.split()
        match = _ARRAY_ELEMENT.match(parts[0]) if len(parts) == 2 else None
        if match is None or match.group(1) != array_id:
            continue
        if match.group(2) is not None:
            states[int(match.group(2))] = parts[1]
            continue
        for span in match.group(3).split(","):
            first, _, last = span.partition("-")
            for index in range(int(first), int(last or first) + 1):
                states[index] = parts[1]
    return states


def element_states(array_id: str, count: int, slurm: SlurmClient) -> dict[int, str]:
    """Each element's state: from squeue while Slurm holds it, else from sacct, else "unknown"."""
    states = parse_array_states(slurm.array_states(array_id), array_id)
    missing = [f"{array_id}_{index}" for index in range(count) if index not in states]
    if missing:
        for job_id, accounted in accounted_states(missing, slurm).items():
            states[int(job_id.rsplit("_", 1)[1])] = accounted.state.split()[0]
    return {index: states.get(index, "UNKNOWN") for index in range(count)}
