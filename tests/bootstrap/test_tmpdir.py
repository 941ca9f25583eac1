"""A rank's own temporary directory per attempt (issue 46): named from the step, made 0700 and exported before
TensorFlow starts, removed when the rank ends, and by srun's task epilog (a real shell) however it ended."""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from hpc_train.bootstrap.tmpdir import TASK_EPILOG, made, rank_tmpdir, task_epilog

STEP = {"SLURM_JOB_ID": "812", "SLURM_STEP_ID": "3", "SLURM_PROCID": "5"}


def test_its_name_is_the_jobs_the_attempts_and_the_ranks_under_the_nodes_own_tmpdir(tmp_path: Path) -> None:
    assert rank_tmpdir({**STEP, "TMPDIR": str(tmp_path)}) == tmp_path / "hpc-train-812-0-3-5"
    assert rank_tmpdir({**STEP, "TMPDIR": str(tmp_path), "SLURM_RESTART_COUNT": "2"}) == tmp_path / "hpc-train-812-2-3-5"
    assert rank_tmpdir({**STEP, "TMPDIR": str(tmp_path / "missing")}) == Path("/tmp/hpc-train-812-0-3-5")
    assert rank_tmpdir({"TMPDIR": str(tmp_path)}) is None  # a run by hand, outside a step: its own TMPDIR kept


def test_made_exports_it_to_tempfile_and_removes_it_with_what_tensorflow_left(tmp_path: Path) -> None:
    env = {**STEP, "TMPDIR": str(tmp_path)}
    with made(env) as path:
        assert path == tmp_path / "hpc-train-812-0-3-5" and stat.S_IMODE(path.stat().st_mode) == 0o700
        assert env["TMPDIR"] == env["TEMP"] == env["TMP"] == env["HPC_TRAIN_TMPDIR"] == str(path)
        (path / "__autograph_generated_filex1y2.py").write_text("def tf__f(): pass\n")
    assert not path.exists() and os.listdir(tmp_path) == []


@pytest.mark.parametrize("planted", ["open to others", "a link", "another user's"])
def test_a_folder_of_its_name_that_someone_else_made_first_is_never_the_ranks(tmp_path: Path, planted: str) -> None:
    """Its name is easy to guess (job ids are public): one planted in a shared /tmp before the rank starts is left
    alone, neither written into (autograph imports what it writes there) nor removed."""
    env = {**STEP, "TMPDIR": str(tmp_path)}
    name = tmp_path / "hpc-train-812-0-3-5"
    if planted == "a link":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        name.symlink_to(tmp_path / "elsewhere")
    else:
        name.mkdir()
        name.chmod(0o777 if planted == "open to others" else 0o700)
        if planted == "another user's":
            if os.geteuid() != 0:
                pytest.skip("making a folder another user's needs root")
            os.chown(name, 65534, 65534)
    with made(env) as path:
        assert path is None and env["TMPDIR"] == str(tmp_path) and "HPC_TRAIN_TMPDIR" not in env
    assert name.is_dir() or name.is_symlink()


def test_in_this_process_tempfile_asks_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**STEP, "TMPDIR": str(tmp_path)}.items():
        monkeypatch.setenv(name, value)
    tempfile.gettempdir()  # (cached before: as a rank's first import may have)
    with made(os.environ) as path:
        assert tempfile.gettempdir() == str(path)
        with tempfile.NamedTemporaryFile(suffix=".py", delete=False) as written:
            assert Path(written.name).parent == path
    assert not path.exists()
    monkeypatch.setattr(tempfile, "tempdir", None)


def test_the_task_epilog_removes_it_in_a_real_shell_whatever_the_tmpdir_is_called(tmp_path: Path) -> None:
    hostile = tmp_path / "a b $(touch PWNED) `touch PWNED`;'q'"
    hostile.mkdir()
    env = {**STEP, "TMPDIR": str(hostile), "SLURM_RESTART_COUNT": "1", "PATH": os.environ["PATH"]}
    own = rank_tmpdir(env)
    (own / "sub").mkdir(parents=True)
    other = hostile / "hpc-train-812-0-3-5"  # the same rank's first attempt: not this epilog's
    other.mkdir()
    script = task_epilog(tmp_path)
    assert script.read_text() == TASK_EPILOG and os.access(script, os.X_OK)
    result = subprocess.run([str(script)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert not own.exists() and other.exists() and not list(tmp_path.rglob("PWNED"))
    outside = subprocess.run([str(script)], env={"PATH": os.environ["PATH"], "TMPDIR": str(hostile)}, timeout=30)
    assert outside.returncode == 0 and other.exists()  # outside a step it removes nothing
