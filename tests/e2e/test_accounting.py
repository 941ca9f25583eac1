"""`hpc-train cluster up --accounting` on a real Slurm: slurmdbd and its own MariaDB, sacct answering, and
status and list reading sacct for failed, completed and requeued command jobs.

A cluster of its own (its directory and ports), apart from the session's, brought up through the command
line and down at the end. The first run installs slurmdbd and mariadb-server with apt-get (a minute or two).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpc_train.localslurm import control
from hpc_train.localslurm.spec import LocalCluster
from tests.fake_slurm import without_slurm
from tests.e2e.jobs import wait_for_end

pytestmark = pytest.mark.slurm_cluster
ACCOUNTING_CLUSTER = LocalCluster(Path("/tmp/hpc-train-slurm-tests-acct"), nodes="acct[1-2]", cpus=1,
                                  accounting=True)
# No --port: `up` takes free ports (from 6917), `down` reads them back from the directory.
WHERE = ["--dir", str(ACCOUNTING_CLUSTER.directory), "--nodes", ACCOUNTING_CLUSTER.nodes]
# Runs until requeued, then ends at once: SLURM_RESTART_COUNT counts the runs before.
# Rank 0 exits 3 once the other has ended well. Were both to fail, srun would end the slower one as soon as the
# first failed (--kill-on-bad-exit), and the job's exit code would be that task's signal (15), not 3.
FAILS_WITH_3 = 'echo going; [ "$SLURM_PROCID" = 0 ] || exit 0; sleep 1; exit 3'
ONCE_REQUEUED = 'echo "run ${SLURM_RESTART_COUNT:-0}"; [ "${SLURM_RESTART_COUNT:-0}" = 0 ] && sleep 120; echo done'


def hpc_train(workdir: Path, env: dict[str, str], *args: str) -> str:
    # `python -m hpc_train`: the code under test, whichever hpc-train is first on PATH.
    result = subprocess.run([sys.executable, "-m", "hpc_train", *args], cwd=workdir, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    if os.geteuid() != 0:
        pytest.skip("a local Slurm cluster needs root")
    if shutil.which("apt-get") is None and not all(shutil.which(p) for p in ("slurmctld", "slurmdbd", "mariadbd")):
        pytest.skip("no Slurm, slurmdbd and MariaDB, and no apt-get to install them")
    cluster_env = {**without_slurm(), **control.slurm_env(ACCOUNTING_CLUSTER)}
    was_running = all(control.status(ACCOUNTING_CLUSTER).values())
    hpc_train(tmp_path_factory.mktemp("up"), dict(os.environ), "cluster", "up", "--accounting", "--cpus", "1", *WHERE)
    yield cluster_env
    queued = subprocess.run(["squeue", "-h", "-o", "%i"], env=cluster_env, capture_output=True, text=True).stdout
    if queued.split():
        subprocess.run(["scancel", *queued.split()], env=cluster_env, capture_output=True)
    if not was_running:
        hpc_train(tmp_path_factory.mktemp("down"), dict(os.environ), "cluster", "down", *WHERE)


def submit(workdir: Path, env: dict[str, str], name: str, command: str) -> str:
    """A 2-node command job; its id."""
    out = hpc_train(workdir, env, "submit", "--nodes", "2", "--name", name, "--", "sh", "-c", command)
    return out.splitlines()[0]


def sacct(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(["sacct", *args], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_sacct_answers_for_the_registered_cluster(env: dict[str, str]) -> None:
    status = hpc_train(Path("/"), dict(os.environ), "cluster", "status", "--accounting", *WHERE)
    assert re.search(r"^mariadbd +running", status, re.M) and re.search(r"^slurmdbd +running", status, re.M)
    clusters = subprocess.run(["sacctmgr", "-n", "-P", "list", "cluster", "format=Cluster"], env=env,
                              capture_output=True, text=True).stdout.split()
    assert "hpctrain" in clusters
    sacct(env, "-n", "-X")
    assert (ACCOUNTING_CLUSTER.directory / "slurmdbd.conf").stat().st_mode & 0o777 == 0o600


def test_status_and_list_read_failed_and_completed_jobs_from_sacct(env: dict[str, str], tmp_path: Path) -> None:
    failing = submit(tmp_path, env, "fails", FAILS_WITH_3)
    fine = submit(tmp_path, env, "fine", "echo fine")
    wait_for_end(failing, env, lambda: "")
    wait_for_end(fine, env, lambda: "")
    assert sacct(env, "-j", failing, "-X", "-n", "-P", "-o", "State,ExitCode").split() == ["FAILED|3:0"]
    status = hpc_train(tmp_path, env, "status", failing)
    assert "failed, exit 3:0 [sacct]" in status and "last:    going" in status, status
    status = hpc_train(tmp_path, env, "status", fine)
    assert "completed, exit 0:0 [sacct]" in status and "last:    fine" in status and "requeued" not in status, status
    listed = hpc_train(tmp_path, env, "list")
    assert re.search(rf"^{failing} +fails +failed", listed, re.M) and re.search(rf"^{fine} +fine +completed",
                                                                                 listed, re.M)


def test_a_requeued_job_shows_its_requeue_from_sacct(env: dict[str, str], tmp_path: Path) -> None:
    job = submit(tmp_path, env, "again", ONCE_REQUEUED)
    log = tmp_path / "runs" / f"again-{job}" / "logs" / "rank-0.out"
    deadline = time.monotonic() + 60
    while "run 0" not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, "the job did not start within 60 s"
        time.sleep(0.3)
    # Slurm refuses a requeue while the job is still being launched ("Job is pending execution"): try again.
    while subprocess.run(["scontrol", "requeue", job], env=env, capture_output=True).returncode != 0:
        assert time.monotonic() < deadline, "scontrol requeue was refused for 60 s"
        time.sleep(0.5)
    assert "requeued 1 time" in hpc_train(tmp_path, env, "status", job)
    assert wait_for_end(job, env, lambda: log.read_text()) == ("COMPLETED", "0:0")
    status = hpc_train(tmp_path, env, "status", job)
    assert "completed, exit 0:0 [sacct]" in status and "again:   requeued 1 time" in status, status
    assert sacct(env, "-j", job, "-X", "-D", "-n", "-P", "-o", "State").split() == ["REQUEUED", "COMPLETED"]
