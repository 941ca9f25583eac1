"""The code snapshot a job runs (runs/snapshot.py; the settings in it, login/snapshot_settings.py): what goes in,
where it is stored, how a job starts in it.

Real git in temporary folders; no Slurm (the submitted script runs in a real shell with a fake srun). The
requeue after an edit, on a real Slurm: tests/e2e/test_snapshots.py.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from hpc_train.config import TrainConfig
from hpc_train.errors import HpcTrainError
from hpc_train.login.snapshot_settings import settings_in_snapshot
from hpc_train.runs.snapshot import JobCode, excluded, plan_snapshot, stored_snapshot, take_snapshot
from tests.fake_slurm import Reply, without_slurm
from tests.login.test_submission import hpc_train, mock_slurm

pytestmark = pytest.mark.quick
HOSTILE = ["a b.py", "it's.py", 'say "hi".py', "$(touch PWNED).py", "new\nline.py"]


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout


def project(folder: Path) -> Path:
    """A git project: train.py committed then edited, sub/task.py committed, new.py untracked, data/ ignored."""
    (folder / "sub").mkdir(parents=True)
    (folder / "data").mkdir()
    (folder / "train.py").write_text("print('committed')\n")
    (folder / "sub" / "task.py").write_text("TASK = 1\n")
    (folder / ".gitignore").write_text("data/\n")
    git(folder, "init", "-q")
    git(folder, "add", ".")
    git(folder, "commit", "-qm", "first")
    (folder / "train.py").write_text("print('edited')\n")
    (folder / "new.py").write_text("NEW = 1\n")
    (folder / "data" / "big.bin").write_bytes(b"0" * 1000)
    return folder


def stored(folder: Path) -> dict[str, str]:
    return {path.relative_to(folder).as_posix(): path.read_text() for path in sorted(folder.rglob("*"))
            if path.is_file()}


def test_a_git_project_is_its_files_at_head_with_uncommitted_changes_and_untracked_ones(tmp_path: Path) -> None:
    top = project(tmp_path / "proj")
    (top / "runs" / "old-1").mkdir(parents=True)
    (top / "runs" / "old-1" / "metrics.json").write_text("{}")  # runs/ never, git-ignored or not
    snapshot = take_snapshot(top / "sub", top / "runs")
    assert snapshot.root == top / "runs" / "snapshots" / snapshot.digest and snapshot.files == snapshot.root / "files"
    assert snapshot.workdir == snapshot.files / "sub"  # the submit directory's copy: where the ranks run
    assert stored(snapshot.files) == {".gitignore": "data/\n", "new.py": "NEW = 1\n", "sub/task.py": "TASK = 1\n",
                                      "train.py": "print('edited')\n"}
    manifest = json.loads((snapshot.root / "snapshot.json").read_text())
    head = git(top, "rev-parse", "HEAD").strip()
    assert (manifest["commit"], manifest["dirty"], manifest["untracked"]) == (head, True, ["new.py"])
    assert "+print('edited')" in (snapshot.root / "diff.patch").read_text()
    assert (snapshot.files / "train.py").stat().st_mode & 0o222 == 0  # read-only
    assert snapshot.root.stat().st_mode & 0o077 == 0  # the user's alone (docs/security.md)


def test_outside_git_it_is_the_directorys_files_but_runs_and_bytecode(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    (tmp_path / "pkg" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "pkg" / "m.py").write_text("M = 1\n")
    (tmp_path / "run.sh").write_text("#!/bin/sh\n")
    (tmp_path / "run.sh").chmod(0o755)
    (tmp_path / "runs" / "x-1").mkdir(parents=True)
    (tmp_path / "runs" / "x-1" / "ckpt").write_text("weights")
    snapshot = take_snapshot(tmp_path, tmp_path / "runs")
    assert snapshot.workdir == snapshot.files
    assert set(stored(snapshot.files)) == {"pkg/m.py", "run.sh"}
    assert os.access(snapshot.files / "run.sh", os.X_OK)
    manifest = json.loads((snapshot.root / "snapshot.json").read_text())
    assert (manifest["commit"], manifest["dirty"]) == (None, False) and not (snapshot.root / "diff.patch").exists()


def test_the_same_code_is_stored_once_and_an_edit_is_a_new_snapshot(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("v1\n")
    first = take_snapshot(tmp_path, tmp_path / "runs")
    stamp = (first.root / "snapshot.json").stat().st_mtime_ns
    assert take_snapshot(tmp_path, tmp_path / "runs") == first
    assert (first.root / "snapshot.json").stat().st_mtime_ns == stamp  # reused, not rewritten
    assert plan_snapshot(tmp_path, tmp_path / "runs") == first  # a dry run's: the same digest, nothing stored
    (tmp_path / "train.py").write_text("v2\n")
    assert plan_snapshot(tmp_path, tmp_path / "runs").digest not in os.listdir(tmp_path / "runs" / "snapshots")
    second = take_snapshot(tmp_path, tmp_path / "runs")
    assert second.digest != first.digest and (first.files / "train.py").read_text() == "v1\n"
    assert sorted(os.listdir(tmp_path / "runs" / "snapshots")) == sorted([first.digest, second.digest])
    (tmp_path / "empty").mkdir()
    empty = take_snapshot(tmp_path / "empty", tmp_path / "empty" / "runs")  # no code: still a folder to start in
    assert empty.workdir.is_dir() and not os.listdir(empty.workdir)


@pytest.mark.parametrize("in_git", [True, False])
def test_hostile_file_names_are_copied_as_they_are(in_git: bool, tmp_path: Path) -> None:
    for name in HOSTILE:
        (tmp_path / name).write_text(name)
    if in_git:
        git(tmp_path, "init", "-q")
    snapshot = take_snapshot(tmp_path, tmp_path / "runs")
    assert stored(snapshot.files) == {name: name for name in HOSTILE}
    assert not list(tmp_path.rglob("PWNED"))


def test_a_snapshot_over_the_limit_is_refused_in_one_line_naming_the_biggest_files_and_the_fix(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("code\n")
    (tmp_path / "weights.h5").write_bytes(b"0" * 3 * 1024 * 1024)
    with pytest.raises(HpcTrainError) as refused:
        take_snapshot(tmp_path, tmp_path / "runs", limit_bytes=1024 * 1024)
    message = str(refused.value)
    assert "\n" not in message and "weights.h5 (3.0 MB)" in message and "over its 1.0 MB limit" in message
    assert all(fix in message for fix in ("--snapshot-exclude PATTERN", "--no-snapshot"))
    assert ".gitignore" not in message  # outside git, .gitignore leaves nothing out
    assert not (tmp_path / "runs" / "snapshots").exists() or not os.listdir(tmp_path / "runs" / "snapshots")
    snapshot = take_snapshot(tmp_path, tmp_path / "runs", exclude=["*.h5"], limit_bytes=1024 * 1024)
    assert set(stored(snapshot.files)) == {"train.py"}


def test_the_size_advice_fits_a_file_git_tracks(tmp_path: Path) -> None:
    """.gitignore does nothing to a tracked file: its advice is --snapshot-exclude or `git rm --cached`, and each
    fix it names works (an untracked big file is still told .gitignore)."""
    (tmp_path / "train.py").write_text("code\n")
    (tmp_path / "it's big.h5").write_bytes(b"0" * 3 * 1024 * 1024)
    (tmp_path / "new.bin").write_bytes(b"1" * 2 * 1024 * 1024)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "train.py", "it's big.h5")
    git(tmp_path, "commit", "-qm", "weights committed by mistake")
    with pytest.raises(HpcTrainError) as refused:
        take_snapshot(tmp_path, tmp_path / "runs", limit_bytes=1024 * 1024)
    message = str(refused.value)
    assert ("git tracks it's big.h5: leave it out with --snapshot-exclude 'it'\"'\"'s big.h5', or untrack it (git rm "
            "--cached 'it'\"'\"'s big.h5', then add it to .gitignore); the others: add them to .gitignore or "
            "--snapshot-exclude PATTERN") in message, message
    [pattern] = shlex.split(message.split("--snapshot-exclude ", 1)[1].split(",", 1)[0])
    (tmp_path / ".gitignore").write_text("*.h5\nnew.bin\n")  # what the advice used to say: not enough alone
    with pytest.raises(HpcTrainError, match="git tracks it's big.h5"):
        take_snapshot(tmp_path, tmp_path / "runs", limit_bytes=1024 * 1024)
    assert set(stored(take_snapshot(tmp_path, tmp_path / "runs", [pattern], limit_bytes=1024 * 1024).files)) == {
        ".gitignore", "train.py"}
    git(tmp_path, "rm", "-q", "--cached", "it's big.h5")  # the advice, as a user types it
    assert set(stored(take_snapshot(tmp_path, tmp_path / "runs", limit_bytes=1024 * 1024).files)) == {
        ".gitignore", "train.py"}


@pytest.mark.parametrize("pattern, path, left_out", [
    ("*.h5", "models/w.h5", True), ("data", "data/x.csv", True), ("data", "src/data/x.csv", True),
    ("data/", "data", False), ("data/", "data/x", True), ("/data", "src/data/x", False), ("src/data", "src/data/x", True),
    ("src/*.py", "src/a.py", True), ("train.py", "src/train.py", True), ("*.h5", "w.h5x", False), ("", "a", False)])
def test_excludes_are_gitignore_like_globs_on_relative_paths(pattern: str, path: str, left_out: bool) -> None:
    assert excluded(path, [pattern]) is left_out


def test_a_stored_snapshot_is_found_from_its_workdir_and_nothing_else_is(tmp_path: Path) -> None:
    top = project(tmp_path / "proj")
    snapshot = take_snapshot(top / "sub", top / "runs")
    assert stored_snapshot(snapshot.workdir) == snapshot
    with pytest.raises(HpcTrainError, match=r"^--in-snapshot: .* is not in a stored code snapshot .*drop --in-snap"):
        stored_snapshot(top / "sub")


def test_a_task_file_runs_from_the_snapshot_and_data_from_where_it_was(tmp_path: Path) -> None:
    top = project(tmp_path / "proj")
    (top / "data" / "ignored_task.py").write_text("")
    snapshot = take_snapshot(top, top / "runs")
    code = JobCode(snapshot, top)
    config = settings_in_snapshot(TrainConfig(task=str(top / "sub" / "task.py"), data_dir="data"), code)
    assert (config.task, config.data_dir) == (str(snapshot.files / "sub" / "task.py"), str(top / "data"))
    assert settings_in_snapshot(TrainConfig(task="sub/task.py"), code).task == "sub/task.py"  # from the workdir
    outside = tmp_path / "elsewhere.py"
    assert settings_in_snapshot(TrainConfig(task="../elsewhere.py"), code).task == str(outside)
    assert settings_in_snapshot(TrainConfig(task="pkg.module"), code).task == "pkg.module"
    with pytest.raises(HpcTrainError, match=r"^task data/ignored_task.py: not in the code snapshot .*--no-snapshot$"):
        settings_in_snapshot(TrainConfig(task="data/ignored_task.py"), code)


def test_a_task_already_in_the_snapshot_is_kept_in_snapshot_as_on_a_remote(tmp_path: Path) -> None:
    top = project(tmp_path / "proj")
    snapshot = take_snapshot(top, tmp_path / "remote" / "runs")  # --in-snapshot: submit_dir is the remote workdir
    code = JobCode(snapshot, tmp_path / "remote")
    task = str(snapshot.workdir / "sub" / "task.py")
    assert settings_in_snapshot(TrainConfig(task=task), code).task == task
    sub = take_snapshot(top / "sub", tmp_path / "remote" / "runs")  # from a subfolder: relative to its copy
    assert settings_in_snapshot(TrainConfig(task="task.py"), JobCode(sub, tmp_path / "remote")).task == "task.py"


def test_the_submitted_script_starts_the_job_in_the_snapshot_from_a_hostile_folder(tmp_path: Path) -> None:
    here = tmp_path / "it's $(touch PWNED) \"x\""
    here.mkdir()
    (here / "train.py").write_text("print('submitted')\n")
    shell = 'echo "CWD=$PWD"; echo "SUBMIT=$HPC_TRAIN_SUBMIT_DIR"; echo "SNAPSHOT=$HPC_TRAIN_SNAPSHOT"'
    fake = mock_slurm(tmp_path / "fake").on("srun", Reply(shell=shell))
    bin_dir = tmp_path / "bin"
    result = subprocess.run([sys.executable, "-m", "hpc_train", "submit", "--nodes", "1", "--name", "n", "--",
                             "python", "train.py"], cwd=here, capture_output=True, text=True, timeout=120,
                            env={**without_slurm(), "PATH": fake.install(bin_dir)["PATH"]})
    assert result.returncode == 0, result.stderr
    [snapshot] = (here / "runs" / "snapshots").iterdir()
    provenance = json.loads((here / "runs" / "n-4242" / "provenance.json").read_text())
    assert provenance["snapshot"]["digest"] == snapshot.name and provenance["submit_dir"] == str(here)
    assert provenance["commit"] is None and provenance["python"] == ".".join(map(str, sys.version_info[:3]))
    (here / "train.py").write_text("print('edited after submit')\n")
    [script] = fake.scripts()
    (tmp_path / "submitted.sh").write_text(script)
    run = subprocess.run(["bash", str(tmp_path / "submitted.sh")], cwd=here, capture_output=True, text=True,
                         env={**without_slurm(), "PATH": fake.install(bin_dir)["PATH"], "SLURM_JOB_ID": "4242"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [f"CWD={snapshot / 'files'}", f"SUBMIT={here}", f"SNAPSHOT={snapshot}"]
    assert (snapshot / "files" / "train.py").read_text() == "print('submitted')\n"
    assert json.loads((here / "runs" / "n-4242" / "provenance.json").read_text())["versions_from"] == "job"
    assert not list(tmp_path.rglob("PWNED"))
    subprocess.run(["rm", "-rf", str(snapshot)], check=True)  # gone: the attempt ends, never runs the code on disk
    gone = subprocess.run(["bash", str(tmp_path / "submitted.sh")], cwd=here, capture_output=True, text=True,
                          env={**without_slurm(), "PATH": fake.install(bin_dir)["PATH"], "SLURM_JOB_ID": "4242"})
    assert gone.returncode == 1 and f"the code snapshot this job runs (snapshots/{snapshot.name}) is gone" in gone.stderr
    assert len(fake.calls("srun")) == 1


def test_local_runs_the_command_in_the_snapshot_and_no_snapshot_on_disk(tmp_path: Path) -> None:
    (tmp_path / "show.py").write_text("import os; print('AT', os.getcwd(), os.environ.get('HPC_TRAIN_SNAPSHOT'))\n")
    ran = hpc_train("submit", "--local", "--nodes", "1", "--name", "l", "--", sys.executable, "show.py", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    [snapshot] = (tmp_path / "runs" / "snapshots").iterdir()
    assert f"AT {snapshot / 'files'} {snapshot}" in ran.stdout
    plain = hpc_train("submit", "--local", "--no-snapshot", "--nodes", "1", "--name", "p", "--", sys.executable,
                      "show.py", cwd=tmp_path)
    assert f"AT {tmp_path} None" in plain.stdout, plain.stderr
    [folder] = (tmp_path / "runs").glob("p-local-*")
    assert json.loads((folder / "provenance.json").read_text())["snapshot"] is None


def test_snapshot_options_are_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "big.bin").write_bytes(b"0" * 2 * 1024 * 1024)
    for options, expected in [(["--snapshot-limit-mb", "1"], "biggest: big.bin (2.0 MB)"),
                              (["--snapshot-limit-mb", "0"], "--snapshot-limit-mb 0: must be more than 0"),
                              (["--in-snapshot"], "is not in a stored code snapshot"),
                              (["--in-snapshot", "--no-snapshot"], "drop --no-snapshot")]:
        result = hpc_train("submit", "--nodes", "1", "--dry-run", *options, "--", "true", cwd=tmp_path)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert expected in result.stderr
    assert not (tmp_path / "runs").exists()


def test_in_snapshot_submits_a_snapshot_stored_already_from_its_workdir(tmp_path: Path) -> None:
    """As `submit --remote` does on the remote: the snapshot rsynced into WORKDIR/runs/snapshots/, then submit
    --in-snapshot from its copy of the folder submitted from; the job's submit directory is WORKDIR."""
    top = project(tmp_path / "laptop" / "proj")
    taken = take_snapshot(top / "sub", top / "runs")
    workdir = tmp_path / "remote work"
    workdir.mkdir()
    subprocess.run(["cp", "-a", str(top / "runs"), str(workdir / "runs")], check=True)
    copy = workdir / "runs" / "snapshots" / taken.digest / "files" / "sub"
    fake = mock_slurm(tmp_path / "fake")
    result = subprocess.run([sys.executable, "-m", "hpc_train", "submit", "--in-snapshot", "--output-dir",
                             str(workdir / "runs"), "--nodes", "1", "--", "python", "task.py"], cwd=copy,
                            capture_output=True, text=True, timeout=120,
                            env={**without_slurm(), "PATH": fake.install(tmp_path / "bin")["PATH"]})
    assert result.returncode == 0, result.stderr
    [script] = fake.scripts()
    assert f"cd {shlex.quote(str(copy))} ||" in script and f"HPC_TRAIN_SUBMIT_DIR={shlex.quote(str(workdir))}" in script
    folder = workdir / "runs" / "sub-4242"  # named after the folder submitted from, not "files"
    assert json.loads((folder / "provenance.json").read_text())["commit"] == git(top, "rev-parse", "HEAD").strip()
    assert sorted(os.listdir(workdir / "runs" / "snapshots")) == [taken.digest]  # no new snapshot taken


def test_the_jobs_first_attempt_records_its_own_versions_keeping_the_git_fields(tmp_path: Path) -> None:
    from hpc_train.runs.provenance import record_job_versions, write_provenance

    write_provenance(tmp_path, {"commit": "abc", "dirty": True, "tensorflow": None, "python": "0.0.0"}, "")
    record_job_versions(tmp_path)
    first = json.loads((tmp_path / "provenance.json").read_text())
    assert first["commit"] == "abc" and first["dirty"] and first["versions_from"] == "job"
    assert first["python"] == ".".join(map(str, sys.version_info[:3]))
    (tmp_path / "provenance.json").write_text(json.dumps({**first, "python": "9.9.9"}))
    record_job_versions(tmp_path)  # a requeue: the first attempt's stay
    assert json.loads((tmp_path / "provenance.json").read_text())["python"] == "9.9.9"
    record_job_versions(tmp_path / "none")  # no provenance.json: nothing to do
