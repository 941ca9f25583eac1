"""Slurm's commands on a login node (remote/sshslurm.py): the shell line ssh runs there, through a real shell."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hpc_train.remote.config import Remote
from hpc_train.remote.sshslurm import command_script

HOSTILE = ["--partition=x'; touch PWNED #", "$(touch PWNED)", "a\"b`touch PWNED`", "*"]


def test_every_word_reaches_the_command_whole_in_the_workdir_after_setup(tmp_path: Path) -> None:
    work = tmp_path / "it's $(touch PWNED) work"
    work.mkdir()
    remote = Remote("c", "h", str(work), "export GREETING=hi; echo setup-noise")
    script = command_script(remote, ["sh", "-c", 'printf "%s|" "$GREETING" "$PWD" "$@"', "sh", *HOSTILE], 5)
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "|".join(["hi", str(work), *HOSTILE]) + "|"  # setup's own output kept out
    assert not list(tmp_path.rglob("PWNED"))


def test_a_command_missing_there_or_outliving_its_bound_is_a_failed_run(tmp_path: Path) -> None:
    remote = Remote("c", "login", str(tmp_path))
    missing = subprocess.run(["bash", "-c", command_script(remote, ["no-such-sbatch", "--test-only"], 5)],
                             capture_output=True, text=True, timeout=30)
    assert missing.returncode == 127
    assert missing.stderr == "no-such-sbatch not found on login after remote c's --setup\n"
    slow = subprocess.run(["bash", "-c", command_script(remote, ["sleep", "30"], 1)], capture_output=True, timeout=30)
    assert slow.returncode == 124
