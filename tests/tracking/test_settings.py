"""What a tracked job logs, decided without MLflow: the store, the parameters, the epochs, the end, the flags."""

from __future__ import annotations

import importlib.util
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from hpc_train.config import TrainConfig
from hpc_train.exitcodes import EXIT_STOPPED
from hpc_train.injob.body import parse
from hpc_train.spec.request import JobSpec
from hpc_train.login.script import render_script
from hpc_train.tracking.settings import (TrackSettings, absolute_uri, artifact_root, epochs_to_log, final_status,
                                         params_of, resolve, status_from_folder, tags_of, ui_hint)
from tests.login.test_script import HOSTILE



def test_the_store_is_the_flag_else_the_variable_else_a_file_beside_the_run_folders(tmp_path: Path) -> None:
    assert resolve("http://a:5000", None, {"MLFLOW_TRACKING_URI": "http://b"}, tmp_path, "job").uri == "http://a:5000"
    assert resolve(None, None, {"MLFLOW_TRACKING_URI": "http://b"}, tmp_path, "job").uri == "http://b"
    local = resolve(None, None, {}, tmp_path / "runs", "job")
    assert local == TrackSettings(f"sqlite:///{tmp_path}/runs/mlflow.db", "job")  # absolute: sqlite:////tmp/...
    assert local.uri.startswith("sqlite:////")
    assert artifact_root(local) == (tmp_path / "runs" / "mlartifacts").as_uri()
    assert artifact_root(TrackSettings("http://b", "job")) is None  # a server has its own
    assert resolve(None, "mine", {}, tmp_path, "job").experiment == "mine"
    assert ui_hint(local) == f"mlflow ui --backend-store-uri {local.uri}"


def test_every_rank_gets_the_variables_that_make_start_run_join_the_jobs_run() -> None:
    assert TrackSettings("http://b", "exp").environment("abc") == {
        "MLFLOW_TRACKING_URI": "http://b", "MLFLOW_EXPERIMENT_NAME": "exp", "MLFLOW_RUN_ID": "abc"}


def test_parameters_are_the_settings_and_the_jobs_shape() -> None:
    params = params_of({"epochs": 3, "learning_rate": 0.01, "steps_per_epoch": None},
                       {"nodes": 2, "tasks": 4, "strategy": "multiworker", "command": ["python", "t.py"]})
    assert params == {"epochs": "3", "learning_rate": "0.01", "nodes": "2", "tasks": "4",
                      "strategy": "multiworker", "command": "python t.py"}
    assert len(params_of({"task": "x" * 9000}, {})["task"]) == 6000  # MLflow's longest value


def test_each_epoch_is_logged_once_with_every_figure_under_its_own_name() -> None:
    epochs = [{"epoch": 1, "loss": 0.5, "val_accuracy": 0.8, "seconds": 2.0, "note": "x"},
              {"epoch": 2, "loss": 0.4, "val_accuracy": float("nan"), "ok": True},
              {"epoch": 3, "loss": 0.3}]
    assert epochs_to_log(epochs, 0) == [(1, {"loss": 0.5, "val_accuracy": 0.8, "seconds": 2.0}),
                                        (2, {"loss": 0.4}), (3, {"loss": 0.3})]
    assert epochs_to_log(epochs, 2) == [(3, {"loss": 0.3})]  # a resumed attempt redid 2: logged before
    assert epochs_to_log(epochs, 3) == []


def test_the_run_ends_as_the_job_did_and_goes_on_when_it_is_requeued_or_retried() -> None:
    since = 100.0
    assert final_status(0, 0, {"state": "finished", "time": 150}, since) == "FINISHED"
    assert final_status(0, 0, {"state": "pruned", "time": 150}, since) == "FINISHED"
    assert final_status(0, 0, {"state": "requeued", "time": 150}, since) is None
    assert final_status(0, 0, {"state": "requeued", "time": 50}, since) == "FINISHED"  # an earlier attempt's
    assert final_status(1, 0, {}, since) is None  # failed, retried by the epilogue
    assert final_status(1, 1, {}, since) == "FAILED"
    assert final_status(EXIT_STOPPED, EXIT_STOPPED, {"state": "stopped", "time": 150}, since) == "KILLED"
    assert final_status(143, 143, {}, since) == "KILLED"


def test_sync_reads_the_end_from_the_folder() -> None:
    assert status_from_folder({"state": "running"}, "FAILED") == "FAILED"  # the body's verdict first
    assert status_from_folder({"state": "finished"}, None) == "FINISHED"
    assert status_from_folder({"state": "stopped"}, None) == "KILLED"
    assert status_from_folder({"state": "running", "attempts": [{"action": "failed"}]}, None) == "FAILED"
    assert status_from_folder({"state": "running"}, None) is None


def test_tags_say_the_job_its_nodes_its_folder_its_attempts_and_a_pruned_elements_verdict() -> None:
    record = {"job_id": "12", "strategy": "multiworker", "nodes": 2, "folder": "runs/a-12"}
    tags = tags_of(record, {"state": "pruned", "reason": "worse half"}, "n[1-2]", ["attempt 2: retried after x"],
                   Path("/home/u/p/runs/a-12"), {})
    assert tags == {"hpc_train.job_id": "12", "hpc_train.strategy": "multiworker", "hpc_train.nodes": "n[1-2]",
                    "hpc_train.attempts": "2", "hpc_train.run_dir": "/home/u/p/runs/a-12",
                    "hpc_train.attempts_why": "attempt 2: retried after x", "pruned": "true",
                    "hpc_train.pruned_why": "worse half"}


def test_the_code_tags_are_provenance_jsons_commit_dirty_flag_and_snapshot() -> None:
    provenance = {"commit": "c0ffee" * 6 + "abcd", "dirty": True, "snapshot": {"digest": "d1g", "path": "/s"}}
    tags = tags_of({}, {}, None, [], Path("/r"), provenance)
    assert (tags["mlflow.source.git.commit"], tags["hpc_train.git_dirty"], tags["hpc_train.snapshot"]) == (
        provenance["commit"], "true", "d1g")
    outside_git = tags_of({}, {}, None, [], Path("/r"), {"commit": None, "dirty": False, "snapshot": None})
    assert "mlflow.source.git.commit" not in outside_git and "hpc_train.snapshot" not in outside_git
    assert outside_git["hpc_train.git_dirty"] == "false"


def test_the_body_takes_tracking_from_its_options_or_the_trainers_settings() -> None:
    body, _ = parse(["--run-dir", "r", "--track", "mlflow", "--experiment", "e", "--", "cmd"], {}, 0.0)
    assert (body.track, body.tracking_uri, body.experiment) == ("mlflow", None, "e")
    body, _ = parse(["--run-dir", "r", "--trainer", "--", "hpc-train", "train", "--set", "track=mlflow",
                     "--set=tracking_uri=http://h:5000/?a=b"], {}, 0.0)
    assert (body.track, body.tracking_uri) == ("mlflow", "http://h:5000/?a=b")
    assert parse(["--run-dir", "r", "--", "cmd"], {}, 0.0)[0].track == "none"


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_tracking_values_reach_the_body_whole_through_a_real_shell(hostile: str, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "hpc-train"  # records what the batch script gives the job body
    fake.write_text('#!/bin/bash\nprintf "%s\\n" "$@" > "$ARGS"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    config = TrainConfig(track="mlflow", tracking_uri=f"http://h/{hostile}", experiment=hostile)
    script = tmp_path / "job.sbatch"
    script.write_text(render_script(JobSpec(nodes=1), config, home=str(tmp_path)))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "7", "SLURM_JOB_NAME": "j",
           "ARGS": str(tmp_path / "args")}
    done = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not list(tmp_path.rglob("PWNED"))
    body, _ = parse((tmp_path / "args").read_text().splitlines()[1:], {}, 0.0)
    assert (body.track, body.tracking_uri, body.experiment) == ("mlflow", f"http://h/{hostile}", hostile)


def test_asking_for_mlflow_where_it_is_missing_is_one_line_with_the_pip_command(tmp_path: Path) -> None:
    hide = tmp_path / "mlflow.py"  # an import of mlflow that fails, as where it is not installed
    hide.write_text("raise ImportError('hidden')\n")
    stub = tmp_path / "sitecustomize.py"
    stub.write_text("import importlib.util, sys\n_real = importlib.util.find_spec\n"
                    "importlib.util.find_spec = lambda name, *a: None if name == 'mlflow' else _real(name, *a)\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, "-m", "hpc_train", "render", "--nodes", "1", "--track", "mlflow"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "hpc-train render: error: --track mlflow needs MLflow, which is not installed here: "
        "pip install 'hpc-train[mlflow]'"]


def test_at_submit_a_server_that_does_not_answer_is_a_warning_not_a_refusal(capsys: pytest.CaptureFixture[str]) -> None:
    from hpc_train.cli.trackingoptions import check_tracking
    from tests.tracking.server import dead_uri

    if importlib.util.find_spec("mlflow") is None:
        pytest.skip("MLflow is not installed")
    dead = dead_uri()
    check_tracking(TrainConfig(track="mlflow", tracking_uri=dead), say_unreachable=True)  # returns: queued anyway
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"hpc-train: warning: MLflow at {dead} does not answer (")
    assert line.endswith("the job is queued all the same, and logs to it if it answers then (else: hpc-train track "
                         "sync ID)")
    check_tracking(TrainConfig(track="mlflow", tracking_uri=dead), say_unreachable=False)
    check_tracking(TrainConfig(), say_unreachable=True)
    assert capsys.readouterr().err == ""


def test_a_relative_store_is_made_absolute_from_the_submit_directory() -> None:
    here = Path("/home/u/proj")
    assert absolute_uri("sqlite:///x.db", here) == "sqlite:////home/u/proj/x.db"
    assert absolute_uri("sqlite:///runs/m.db?timeout=9", here) == "sqlite:////home/u/proj/runs/m.db?timeout=9"
    assert absolute_uri("file:relative", here) == "file:///home/u/proj/relative"
    assert absolute_uri("mlruns", here) == "/home/u/proj/mlruns"
    assert absolute_uri("./out/mlruns", here) == "/home/u/proj/out/mlruns"
    for kept in ("sqlite:////abs/m.db", "file:///abs", "/abs/mlruns", "http://h:5000", "https://h/x",
                 "postgresql+psycopg2://u@h/db", "databricks", "databricks://profile", "~/mlruns"):
        assert absolute_uri(kept, here) == kept


@pytest.mark.parametrize("how", ["flag", "yaml"])
def test_a_submitted_jobs_script_carries_the_absolute_store(tmp_path: Path, how: str) -> None:
    from tests.login.test_submission import hpc_train, mock_slurm

    if importlib.util.find_spec("mlflow") is None:
        pytest.skip("MLflow is not installed")
    fake = mock_slurm(tmp_path / "fake")
    (tmp_path / "c.yaml").write_text("track: mlflow\ntracking_uri: sqlite:///x.db\n")
    given = ["--track", "mlflow", "--tracking-uri", "sqlite:///x.db"] if how == "flag" else ["--config", "c.yaml"]
    done = hpc_train("submit", "--nodes", "1", "--name", "t", *given, "--", "true", cwd=tmp_path, fake=fake)
    assert done.returncode == 0, done.stderr
    # submitit runs the job body it pickled (injob/entrypoints.py: JobCall): its body and settings carry the store.
    import submitit

    [pickled] = (tmp_path / "runs").glob("t-*/*_submitted.pkl")
    call = submitit.helpers.DelayedSubmission.load(pickled).function
    assert call.body.tracking_uri == f"sqlite:///{tmp_path}/x.db", call.body
    assert f"tracking_uri: sqlite:///{tmp_path}/x.db" in call.config
    shown = hpc_train("submit", "--nodes", "1", "--name", "t", *given, "--dry-run", "--", "true", cwd=tmp_path,
                      fake=fake)
    assert f"--tracking-uri sqlite:///{tmp_path}/x.db" in shown.stdout, shown.stdout  # the script a person reads
