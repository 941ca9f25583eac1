"""Never queue what cannot run, on a real Slurm: submit's preflight, pending reasons in words, and doctor."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpc_train.localslurm import control
from hpc_train.localslurm.spec import LocalCluster
from hpc_train.slurm.client import fields
from tests.e2e.jobs import wait_for_end
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
    (("--nodes", "2", "--partition", "debug,nosuch"), "--partition nosuch (of debug,nosuch): no such partition "
                                                      "here; choose among debug"),
    (("--nodes", "2", "--mem", "100000G"), "Slurm would not run this request (Requested node configuration is not "
                                           "available): --mem=100000G"),
    # (Slurm itself takes a job it knows nothing of as ended: the job would start at once.)
    (("--nodes", "1", "--after", "99999999"), "--after/--dependency: Slurm knows no job 99999999"),
    (("--nodes", "1", "--sbatch", "reservation=nosuch"), "Slurm would not run this request (Requested reservation "
                                                         "is invalid): "),
])
def test_a_request_slurm_cannot_run_is_refused_before_it_is_queued(cluster: LocalCluster, tmp_path: Path,
                                                                   request_options: tuple[str, ...],
                                                                   expected: str) -> None:
    result = hpc_train(cluster, tmp_path, "submit", *request_options, "--", "true")
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"hpc-train submit: error: {expected}")
    assert not (tmp_path / "runs").exists()  # nothing submitted, no job folder


def test_a_held_job_says_why_it_waits_and_one_submitted_after_it_starts_once_it_ends(cluster: LocalCluster,
                                                                                      tmp_path: Path) -> None:
    submitted = hpc_train(cluster, tmp_path, "submit", "--nodes", "1", "--hold", "--", "true")
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.splitlines()[0]
    # --after, and --sbatch options: a node kept out, and a value sbatch must unquote (a quote, a #).
    after = hpc_train(cluster, tmp_path, "submit", "--nodes", "1", "--after", job_id, "--sbatch", "exclude=node1",
                      "--sbatch", "comment=it's #1", "--", "true")
    assert after.returncode == 0, after.stderr
    second = after.stdout.splitlines()[0]
    env = control.slurm_env(cluster)
    try:
        status = hpc_train(cluster, tmp_path, "status", job_id).stdout
        assert "pending" in status and "waiting: JobHeldUser: held by you: it starts after scontrol release" in status
        assert "waiting: Dependency: waiting for a job it depends on" in hpc_train(cluster, tmp_path, "status",
                                                                                   second).stdout
        assert subprocess.run(["squeue", "-h", "-j", second, "-o", "%k"], env=env, capture_output=True,
                              text=True).stdout.strip() == "it's #1"
    finally:
        hpc_train(cluster, tmp_path, "cancel", job_id)
    state, _ = wait_for_end(second, env, lambda: hpc_train(cluster, tmp_path, "logs", second).stdout)
    first, then = (fields(subprocess.run(["scontrol", "show", "job", "-o", job], env=env, capture_output=True,
                                         text=True).stdout) for job in (job_id, second))
    assert state == "COMPLETED" and then["NodeList"] != "node1" and then["StartTime"] >= first["EndTime"], then


def test_a_partition_list_starts_the_job_in_the_one_that_can_run_it(cluster: LocalCluster, tmp_path: Path) -> None:
    """(issue 37, 3) `--partition two,debug`: partition two (made for this test, 2 nodes) can never hold 3 nodes,
    debug can: preflight lets it through, Slurm starts it in debug, and status says so."""
    env = control.slurm_env(cluster)
    made = subprocess.run(["scontrol", "create", "PartitionName=two", "Nodes=node[9-10]", "State=UP"], env=env,
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    try:
        submitted = hpc_train(cluster, tmp_path, "submit", "--nodes", "3", "--partition", "two,debug", "--", "true")
        assert submitted.returncode == 0, submitted.stderr
        job_id = submitted.stdout.strip()
        state, _ = wait_for_end(job_id, env, lambda: hpc_train(cluster, tmp_path, "logs", job_id).stdout)
        assert state == "COMPLETED"
        status = hpc_train(cluster, tmp_path, "status", job_id)
        assert "(3 tasks, multiworker), partition debug" in status.stdout.splitlines()[1], status.stdout
    finally:
        subprocess.run(["scontrol", "delete", "PartitionName=two"], env=env, capture_output=True)


@pytest.mark.tensorflow
def test_doctor_passes_on_a_working_cluster(cluster: LocalCluster, tmp_path: Path) -> None:
    result = hpc_train(cluster, tmp_path, "doctor", "--data-dir", str(shared_mnist()))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    passed = [line.split(":")[0].split()[-1] for line in lines if line.startswith("ok")]
    assert passed[:7] == ["slurm", "accounting", "gpus", "tensorflow", "keras", "ports", "data"]
    assert set(passed[7:]) <= {"memlock", "nofile"}  # this machine's limits: ok or warn
    # One network stack: the job's ports take this host's connections (loopback), as no site firewall stops them.
    assert any(line.startswith("warn  outside: the job's ports take connections from this host") for line in lines)
    assert any(line.startswith("ok    keras: tf-keras 2.") for line in lines)  # a command's tf.keras works there
    assert "ok    slurm: answers; partition debug (default): 4 nodes" in lines
    assert "ok    gpus: 2 per node (GRES)" in lines
