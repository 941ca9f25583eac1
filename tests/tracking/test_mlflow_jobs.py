"""Tracked jobs against a real MLflow server, read back through MLflow's client: a user's command on two ranks
is one run; a dead server is one warning, the job goes on, and `hpc-train track sync` uploads it later.
(On a real Slurm, a requeued 2-node trainer job and a sweep: tests/e2e/test_tracking.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.fake_slurm import without_slurm
from tests.tracking.server import MlflowServer, dead_uri

pytestmark = pytest.mark.mlflow
# Every rank joins the job's run as an unmodified script would (mlflow.start_run()), each logging its own figure;
# rank 0 writes two epochs into metrics.json, as the trainer does, for the job body to log.
JOINS = """import os, sys
from pathlib import Path
rank = int(os.environ.get("SLURM_PROCID", "0"))
print("MLFLOW_RUN_ID" in os.environ and "joined" or "no run", flush=True)
if "MLFLOW_RUN_ID" in os.environ:
    import mlflow
    with mlflow.start_run() as run:
        mlflow.log_metric(f"rank_{rank}", 1.0)
if rank == 0:
    from hpc_train.runs.metrics import write_metrics
    write_metrics(Path(os.environ["HPC_TRAIN_RUN_DIR"]), {"epochs": [{"epoch": 1, "loss": 0.5, "val_accuracy": 0.8},
                                                                     {"epoch": 2, "loss": 0.25, "val_accuracy": 0.9}]})
"""


def hpc_train(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpc_train", *args], cwd=cwd, env=without_slurm(),
                          capture_output=True, text=True, timeout=180)


def submit_here(tmp_path: Path, name: str, uri: str, experiment: str, tasks: int) -> subprocess.CompletedProcess[str]:
    (tmp_path / "joins.py").write_text(JOINS)
    return hpc_train("submit", "--local", "--nodes", "1", "--ntasks-per-node", str(tasks), "--name", name,
                     "--track", "mlflow", "--tracking-uri", uri, "--experiment", experiment, "--",
                     sys.executable, str(tmp_path / "joins.py"), cwd=tmp_path)


def test_every_rank_of_a_command_joins_the_jobs_one_run(mlflow_server: MlflowServer, tmp_path: Path) -> None:
    experiment = f"cmd-{uuid.uuid4().hex[:8]}"
    done = submit_here(tmp_path, "cmd", mlflow_server.uri, experiment, tasks=2)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr, done.stderr
    [run] = mlflow_server.runs(experiment)
    assert {"rank_0", "rank_1"} <= set(run.data.metrics)  # both ranks logged into the one run
    assert mlflow_server.steps(run.info.run_id, "loss") == [1, 2]
    assert run.info.status == "FINISHED"
    assert run.data.params["tasks"] == "2" and "joins.py" in run.data.params["command"]
    [folder] = (tmp_path / "runs").glob("cmd-local-*")
    assert run.data.tags["hpc_train.job_id"] == "local" + folder.name.partition("-local")[2]
    assert run.data.tags["hpc_train.attempts"] == "1"
    uploaded = [artifact.path for artifact in mlflow_server.client().list_artifacts(run.info.run_id)]
    assert "metrics.json" in uploaded and "ledger.json" in uploaded
    # The goodput ledger where users look: goodput and each category's seconds, at the attempts counted (1).
    assert 0 <= run.data.metrics["goodput"] <= 1 and mlflow_server.steps(run.info.run_id, "goodput") == [1]
    assert run.data.metrics["ledger_compute_seconds"] + run.data.metrics["ledger_startup_seconds"] > 0


def test_a_dead_server_is_a_warning_and_track_sync_uploads_the_run_later(mlflow_server: MlflowServer,
                                                                         tmp_path: Path) -> None:
    experiment, dead = f"dead-{uuid.uuid4().hex[:8]}", dead_uri()
    done = submit_here(tmp_path, "dead", dead, experiment, tasks=1)
    assert done.returncode == 0, done.stderr  # the job went on
    [folder] = (tmp_path / "runs").glob("dead-local-*")
    job_id = "local" + folder.name.partition("-local")[2]
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and warnings[0].startswith(f"hpc-train: warning: MLflow at {dead}: "), done.stderr
    assert warnings[0].endswith(f"the job goes on without it (hpc-train track sync {job_id} uploads its run later)")
    assert mlflow_server.runs(experiment) == []
    still_dead = hpc_train("track", "sync", job_id, cwd=tmp_path)  # to the job's own server: still dead
    assert still_dead.returncode != 0
    [line] = still_dead.stderr.strip().splitlines()
    assert line.startswith(f"hpc-train track: error: MLflow at {dead}: ") and "then run it again" in line
    for _ in range(2):  # idempotent: the same run, each epoch once
        synced = hpc_train("track", "sync", job_id, "--tracking-uri", mlflow_server.uri, cwd=tmp_path)
        assert synced.returncode == 0, synced.stderr
        [run] = mlflow_server.runs(experiment)
        assert mlflow_server.steps(run.info.run_id, "loss") == [1, 2]
        assert run.info.status == "FINISHED"
    assert synced.stdout.startswith(f"{folder.name}: MLflow run {run.info.run_id} in experiment {experiment}, "
                                    "2 epoch(s) logged, FINISHED; see it: http://"), synced.stdout
    report = hpc_train("report", job_id, cwd=tmp_path)
    assert f"MLflow run {run.info.run_id} in experiment {experiment}; see it: {mlflow_server.uri}" in report.stdout

