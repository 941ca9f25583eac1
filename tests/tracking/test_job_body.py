"""The job body's tracking (tracking/job.py, injob/tracked.py) against an MLflow client in memory: the tags it
gives the run, and how the run ends when an attempt ends before or during its step."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from hpc_train.tracking.job import JobTracking
from tests.tracking.fake_mlflow import FakeMlflow, fake_mlflow  # noqa: F401 - the fixture

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def run_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "submit" / "runs" / "job-12"
    folder.mkdir(parents=True)
    (folder / "job.json").write_text(json.dumps({"job_id": "12", "name": "job", "folder": "runs/job-12"}))
    return folder


def test_the_commit_comes_from_provenance_json_not_from_git_where_the_job_runs(
        fake_mlflow: FakeMlflow, tmp_path: Path, monkeypatch) -> None:
    folder = run_folder(tmp_path)
    (folder / "provenance.json").write_text(json.dumps(
        {"commit": COMMIT, "dirty": True, "snapshot": {"digest": "abc123", "path": "/x"}}))
    checkout = tmp_path / "elsewhere"  # the job's cwd: a git checkout of another commit
    checkout.mkdir()
    for command in (["init", "-q"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
                                     "-m", "other"]):
        subprocess.run(["git", *command], cwd=checkout, check=True, capture_output=True)
    monkeypatch.chdir(checkout)
    tracking = JobTracking.for_job(folder, "sqlite:////x/mlflow.db", None, {}, print)
    tracking.start()
    tracking.finish(0, 0)
    [run] = fake_mlflow.runs.values()
    assert run.tags["mlflow.source.git.commit"] == COMMIT
    assert (run.tags["hpc_train.git_dirty"], run.tags["hpc_train.snapshot"]) == ("true", "abc123")
    assert run.tags["hpc_train.run_dir"] == str(folder)
    assert run.status == "FINISHED"


def test_a_relative_store_that_reaches_the_job_is_the_submit_directorys(tmp_path: Path, monkeypatch) -> None:
    folder = run_folder(tmp_path)
    (folder / "provenance.json").write_text(json.dumps({"submit_dir": str(tmp_path / "submit")}))
    monkeypatch.chdir(tmp_path)  # the job runs elsewhere: in the code snapshot
    env = {"MLFLOW_TRACKING_URI": "mlruns"}
    assert JobTracking.for_job(folder, "sqlite:///x.db", None, env, print).settings.uri == \
        f"sqlite:///{tmp_path}/submit/x.db"
    assert JobTracking.for_job(folder, None, None, env, print).settings.uri == f"{tmp_path}/submit/mlruns"
