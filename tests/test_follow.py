"""Following a job, against a mock Slurm: scontrol and squeue replaced by scripts on PATH."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from hpc_train.follow import follow, job_state


def fake_slurm(bin_dir: Path, scontrol_states: list[str], squeue_state: str = "") -> dict[str, str]:
    """scontrol answers the next state of the list on each call (then the last); squeue a fixed one."""
    bin_dir.mkdir()
    (bin_dir / "states").write_text("\n".join(scontrol_states) + "\n")
    scripts = {
        "scontrol": f'''#!/bin/sh
state=$(head -n 1 "{bin_dir}/states")
[ "$(wc -l < "{bin_dir}/states")" -gt 1 ] && sed -i 1d "{bin_dir}/states"
[ -n "$state" ] && echo "JobId=$4 JobName=x JobState=$state Reason=None ExitCode=0:0 StdOut=/x/slurm-$4.out"
exit 0
''',
        "squeue": f"#!/bin/sh\necho '{squeue_state}'\n",
    }
    for name, text in scripts.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_state_comes_from_scontrol_even_without_accounting(tmp_path: Path) -> None:
    env = fake_slurm(tmp_path / "bin", ["COMPLETED"])
    assert job_state("42", env) == ("COMPLETED", "0:0")


def test_when_scontrol_forgot_the_job_squeue_is_asked(tmp_path: Path) -> None:
    env = fake_slurm(tmp_path / "bin", [""], squeue_state="RUNNING")
    assert job_state("42", env) == ("RUNNING", "")


def test_follow_shows_state_changes_and_the_chiefs_progress(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_text("0: hpc-train: epoch 1/2  loss 0.5\n1: noise from worker 1\n0: I0000 tensorflow chatter\n"
                   "0: hpc-train: epoch 2/2  loss 0.2\n0: hpc-train: half a li")
    env = fake_slurm(tmp_path / "bin", ["PENDING", "RUNNING", "RUNNING", "COMPLETED"])
    shown: list[str] = []
    assert follow("42", log, env, shown.append, poll_seconds=0.01) == ("COMPLETED", "0:0")
    assert shown == ["job 42: pending", "hpc-train: epoch 1/2  loss 0.5", "hpc-train: epoch 2/2  loss 0.2",
                     "job 42: running", "job 42: completed"]
