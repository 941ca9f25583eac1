"""`hpc-train cluster`: what it refuses before touching anything (the clusters themselves: tests/e2e)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_a_job_submit_lua_that_is_not_there_is_one_line_and_nothing_is_made(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    done = subprocess.run([sys.executable, "-m", "hpc_train", "cluster", "up", "--dir", str(directory),
                           "--job-submit-lua", str(tmp_path / "no such.lua")], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.count("\n") == 1 and "no such.lua: no such file (or not a file); give a site's " \
        "job_submit.lua" in done.stderr, done.stderr
    assert not directory.exists()
