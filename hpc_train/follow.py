"""Follow a submitted Slurm job: its state and its chief's progress lines, until it ends.

Works without Slurm accounting: the state comes from `scontrol show job`
(kept for MinJobAge after the end), else from `squeue`.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

FINAL_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                          "PREEMPTED", "BOOT_FAIL", "DEADLINE"})
# The chief's progress, as srun --label prints it ("0: hpc-train: epoch 2/3 ...").
PROGRESS = re.compile(r"^(?:\d+: )?(hpc-train: .*)$")


def job_info(job_id: str, env: Mapping[str, str]) -> dict[str, str]:
    """`scontrol show job` as a dict (JobState, ExitCode, StdOut, ...); empty once Slurm forgot the job."""
    shown = subprocess.run(["scontrol", "show", "job", "-o", job_id], env=dict(env), capture_output=True, text=True)
    return dict(part.split("=", 1) for part in shown.stdout.split() if "=" in part)


def accounted_state(job_id: str, env: Mapping[str, str]) -> tuple[str, str, str] | None:
    """(state, exit code, elapsed) from sacct, or None where Slurm keeps no accounting."""
    result = subprocess.run(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "State,ExitCode,Elapsed"],
                            env=dict(env), capture_output=True, text=True)
    first = result.stdout.strip().splitlines()[:1]
    if result.returncode != 0 or not first:
        return None
    state, code, elapsed = (first[0].split("|") + ["", "", ""])[:3]
    return state.split()[0], code, elapsed


def job_state(job_id: str, env: Mapping[str, str]) -> tuple[str, str]:
    """(state, exit code) of a job; ("UNKNOWN", "") when Slurm no longer knows it."""
    fields = job_info(job_id, env)
    if "JobState" in fields:
        return fields["JobState"], fields.get("ExitCode", "")
    queued = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], env=dict(env), capture_output=True,
                            text=True).stdout.strip()
    return (queued or "UNKNOWN"), ""


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
