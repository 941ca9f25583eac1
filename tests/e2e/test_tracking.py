"""Tracking on a real Slurm: a sweep of a user's command on two nodes is a parent run in MLflow with one child
run per element, every rank of an element in its one run. (The requeued 2-node trainer job, one run through the
requeue: test_trainer_jobs.py; a command and a dead server without Slurm: tests/tracking/test_mlflow_jobs.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hpc_train.localslurm import control
from hpc_train.localslurm.spec import LocalCluster
from tests.e2e.test_sweeps import wait_for_elements
from tests.fake_slurm import without_slurm
from tests.tracking.server import MlflowServer
from tests.tracking.test_mlflow_jobs import JOINS

pytestmark = [pytest.mark.slurm_cluster, pytest.mark.mlflow]


def test_a_sweep_is_a_parent_run_with_a_child_run_per_element(cluster: LocalCluster, mlflow_server: MlflowServer,
                                                               tmp_path: Path) -> None:
    env = {**without_slurm(), **control.slurm_env(cluster)}
    (tmp_path / "joins.py").write_text(JOINS)
    experiment = f"sweep-{tmp_path.name}"
    submitted = subprocess.run([sys.executable, "-m", "hpc_train", "submit", "--nodes", "2", "--name", "tsw",
                                "--sweep", "seed=1,2", "--track", "mlflow", "--tracking-uri", mlflow_server.uri,
                                "--experiment", experiment, "--", sys.executable, str(tmp_path / "joins.py")],
                               cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert submitted.returncode == 0, submitted.stderr
    array = submitted.stdout.splitlines()[0]
    states, _ = wait_for_elements(array, 2, env)
    assert states == {0: "COMPLETED", 1: "COMPLETED"}, states
    runs = mlflow_server.runs(experiment)
    [parent] = [run for run in runs if "mlflow.parentRunId" not in run.data.tags]
    children = sorted((run for run in runs if run is not parent), key=lambda run: run.info.run_name)
    assert [run.info.run_name for run in children] == [f"tsw-{array}_0", f"tsw-{array}_1"]
    for child in children:
        assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert {"rank_0", "rank_1"} <= set(child.data.metrics)  # both nodes' ranks in the element's one run
        assert mlflow_server.steps(child.info.run_id, "loss") == [1, 2]
        assert child.info.status == "FINISHED"
    assert mlflow_server.client().get_run(parent.info.run_id).info.status == "FINISHED"  # the last element closed it
    report = subprocess.run([sys.executable, "-m", "hpc_train", "report", array], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60)
    assert f"MLflow parent run {parent.info.run_id} in experiment {experiment}; see it: {mlflow_server.uri}" \
        in report.stdout, report.stdout + report.stderr
