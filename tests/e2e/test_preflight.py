"""Never queue what cannot run, on a real Slurm: submit's preflight, pending reasons in words, and doctor."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpc_train.localslurm import control
from hpc_train.localslurm.spec import LocalCluster
from tests.fake_slurm import without_slurm
from tests.mnist_data import shared_mnist

pytestmark = pytest.mark.slurm_cluster
ROOT = Path(__file__).resolve().parents[2]


def hpc_train(cluster: LocalCluster, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**without_slurm(), **control.slurm_env(cluster), "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    return subprocess.run([sys.executable, "-m", "hpc_train", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("request_options, expected", [
    (("--nodes", "100000"), "--nodes 100000: partition debug has 4 node(s) in all; ask for at most 4"),
    (("--nodes", "2", "--gpus-per-node", "4"), "--gpus-per-node 4: partition debug has 0 node(s) with that many "
                                                "GPUs (at most 2 per node), 2 asked for"),
    (("--nodes", "2", "--partition", "nosuch"), "--partition nosuch: no such partition here; choose one of debug"),
    (("--nodes", "2", "--mem", "100000G"), "Slurm would not run this request (Requested node configuration is not "
                                           "available): --mem=100000G"),
])
def test_a_request_slurm_cannot_run_is_refused_before_it_is_queued(cluster: LocalCluster, tmp_path: Path,
                                                                   request_options: tuple[str, ...],
                                                                   expected: str) -> None:
    result = hpc_train(cluster, tmp_path, "submit", *request_options, "--", "true")
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"hpc-train submit: error: {expected}")
    assert not (tmp_path / "runs").exists()  # nothing submitted, no job folder


def test_a_held_job_says_why_it_waits(cluster: LocalCluster, tmp_path: Path) -> None:
    submitted = hpc_train(cluster, tmp_path, "submit", "--nodes", "1", "--hold", "--", "true")
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.splitlines()[0]
    try:
        status = hpc_train(cluster, tmp_path, "status", job_id).stdout
        assert "pending" in status and "waiting: JobHeldUser: held by you: it starts after scontrol release" in status
    finally:
        hpc_train(cluster, tmp_path, "cancel", job_id)


@pytest.mark.tensorflow
def test_doctor_passes_on_a_working_cluster(cluster: LocalCluster, tmp_path: Path) -> None:
    result = hpc_train(cluster, tmp_path, "doctor", "--data-dir", str(shared_mnist()))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0].split()[-1] for line in lines if line.startswith("ok")] == [
        "slurm", "accounting", "gpus", "tensorflow", "keras", "ports", "data"]
    assert any(line.startswith("ok    keras: tf-keras 2.") for line in lines)  # a command's tf.keras works there
    assert "ok    slurm: answers; partition debug (default): 4 nodes" in lines
    assert "ok    gpus: 2 per node (GRES)" in lines
