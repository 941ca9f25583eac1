"""Follow a submitted Slurm job: its state and its chief's progress lines, until it ends.

Works without Slurm accounting: the state comes from `scontrol show job`
(kept for MinJobAge after the end), else from `squeue`, and only then from
sacct (which remembers jobs for good, where there is accounting).
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import takewhile
from pathlib import Path

FINAL_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                          "PREEMPTED", "BOOT_FAIL", "DEADLINE"})
# The chief's progress, as srun --label prints it ("0: hpc-train: epoch 2/3 ...").
PROGRESS = re.compile(r"^(?:\d+: )?(hpc-train: .*)$")


def slurm_command(command: list[str], env: Mapping[str, str], timeout: float = 30,
                  stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run one of Slurm's commands; one that is missing here or does not answer is a failed run (said in its
    stderr), not an error."""
    try:
        return subprocess.run(command, env=dict(env), input=stdin, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as error:
        return subprocess.CompletedProcess(command, 1, "", str(error))


def job_info(job_id: str, env: Mapping[str, str]) -> dict[str, str]:
    """`scontrol show job` as a dict (JobState, ExitCode, StdOut, ...); empty once Slurm forgot the job."""
    shown = slurm_command(["scontrol", "show", "job", "-o", job_id], env)
    return dict(part.split("=", 1) for part in shown.stdout.split() if "=" in part)


@dataclass(frozen=True)
class Accounted:
    """What sacct says of a job's latest run, and how often Slurm requeued the job."""

    state: str  # COMPLETED, FAILED, CANCELLED ("CANCELLED by 0" in sacct), ...
    exit_code: str  # "3:0": the code, then the signal
    elapsed: str
    requeues: int


def accounted_state(job_id: str, env: Mapping[str, str]) -> Accounted | None:
    """The job as sacct knows it, or None where Slurm keeps no accounting (or sacct does not know the job)."""
    # -D: every run of a requeued job, one row each, the latest last (without it, only the latest).
    result = slurm_command(["sacct", "-j", job_id, "-X", "-D", "-n", "-P", "-o", "State,ExitCode,Elapsed"], env)
    return parse_sacct(result.stdout) if result.returncode == 0 else None


def parse_sacct(text: str) -> Accounted | None:
    """`sacct -X -D -n -P -o State,ExitCode,Elapsed` of one job id, oldest row first (pure)."""
    rows = [line.split("|") for line in text.splitlines() if line.strip()]
    if not rows:
        return None
    state, code, elapsed = (rows[-1] + ["", "", ""])[:3]
    # The runs that ended in a requeue, the latest among them until its next run has a row of its own; a row
    # before those is an older job with the same id.
    ended = rows if state.startswith("REQUEUE") else rows[:-1]
    requeues = sum(1 for _ in takewhile(lambda row: row[0].startswith("REQUEUE"), reversed(ended)))
    return Accounted((state.split() or ["UNKNOWN"])[0], code, elapsed, requeues)


def job_state(job_id: str, env: Mapping[str, str], fields: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(state, exit code) of a job; ("UNKNOWN", "") when Slurm no longer knows it (or is not here).
    `fields`: its job_info when the caller has it already."""
    fields = job_info(job_id, env) if fields is None else fields
    if "JobState" in fields:
        return fields["JobState"], fields.get("ExitCode", "")
    queued = slurm_command(["squeue", "-h", "-j", job_id, "-o", "%T"], env).stdout.strip()
    if queued:
        return queued, ""
    accounted = accounted_state(job_id, env)  # after MinJobAge, only accounting still knows the job
    return (accounted.state, accounted.exit_code) if accounted else ("UNKNOWN", "")


def follow(job_id: str, log: Path, env: Mapping[str, str], show: Callable[[str], None],
           poll_seconds: float = 1.0, timeout: float = 3600.0) -> tuple[str, str]:
    """Show state changes and progress lines until the job ends; return its final (state, exit code)."""
    last_state, read = "", 0
    deadline = time.monotonic() + timeout
    while True:
        state, code = job_state(job_id, env)
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
