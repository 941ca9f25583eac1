"""From a "laptop" (PATH: ssh, rsync and python only; no Slurm) to the local Slurm through a real sshd as its login
node: submit --remote a sweep of 2 elements (its code snapshotted here, run from the copy there), then status,
logs, list, report and pull over the same shared connection; cancel --remote a held job."""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from hpc_train.localslurm.spec import LocalCluster
from tests.sshd import GOOD, SshServer, hpc_train, laptop_env

pytestmark = pytest.mark.slurm_cluster
# Each element writes its figures the documented way, from the code the snapshot took (train.py here).
TRAIN = ("import os, sys\nfrom hpc_train.runs.metrics import write_metrics\nseed = int(sys.argv[1])\n"
         "print('seed', seed, 'from the snapshot')\n"
         "write_metrics(os.environ['HPC_TRAIN_RUN_DIR'], {'epochs': [{'epoch': 1, 'val_accuracy': seed / 10}]})\n")


def submitted_id(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def wait_until_ended(env: dict[str, str], job: str, here: Path, elements: int) -> str:
    """status --remote until every element ended; its last answer."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        status = hpc_train(env, "status", job, cwd=here)
        assert status.returncode == 0, status.stderr
        if f"{elements} completed" in status.stdout.splitlines()[0] or "failed" in status.stdout:
            return status.stdout
        time.sleep(1)
    pytest.fail(f"sweep {job} did not end within 180 s")


def test_a_sweep_submitted_from_a_laptop_runs_there_and_comes_back(cluster: LocalCluster, sshd: SshServer,
                                                                    tmp_path: Path) -> None:
    laptop = {**laptop_env(sshd, tmp_path / "home"), "HPC_TRAIN_REMOTE": "c"}
    here, work = tmp_path / "project", tmp_path / "login-work"
    (here / "code").mkdir(parents=True)
    (here / "code" / "train.py").write_text(TRAIN)
    setup = sshd.setup(f"SLURM_CONF={shlex.quote(str(cluster.conf))}")
    assert hpc_train(laptop, "remote", "add", "c", "--host", GOOD, "--workdir", str(work), "--setup", setup,
                     cwd=here).returncode == 0
    options = ["--nodes", "1", "--name", "sw", "--sweep", "seed=3,7"]
    array = submitted_id(hpc_train(laptop, "submit", *options, "--", "python", "train.py", "{seed}",
                                   cwd=here / "code"))
    status = wait_until_ended(laptop, array, here, 2)
    assert status.splitlines()[0] == f"sweep {array} (sw): 2 elements: 2 completed", status
    logs = hpc_train(laptop, "logs", f"{array}_1", cwd=here)
    assert "seed 7 from the snapshot" in logs.stdout, logs.stdout + logs.stderr
    listed = hpc_train(laptop, "list", cwd=here)
    assert array in listed.stdout and "sw" in listed.stdout, listed.stdout + listed.stderr
    report = hpc_train(laptop, "report", array, cwd=here)
    assert "best (highest val_accuracy): element 1: seed=7: val_accuracy 0.7000" in report.stdout, report.stderr
    pulled = hpc_train(laptop, "pull", array, cwd=here)
    assert pulled.returncode == 0, pulled.stderr
    runs = here / "runs"
    assert {f"sw-{array}", f"sw-{array}_0", f"sw-{array}_1"} <= {path.name for path in runs.iterdir()}
    assert json.loads((runs / f"sw-{array}_1" / "metrics.json").read_text())["epochs"][0]["val_accuracy"] == 0.7
    assert (runs / f"sw-{array}" / "sweep.csv").is_file()  # report wrote it there; pull brought it
    assert "seed 3 from the snapshot" in (runs / f"sw-{array}_0" / "logs" / "rank-0.out").read_text()


def test_cancel_over_a_remote_cancels_the_job_there(cluster: LocalCluster, sshd: SshServer, tmp_path: Path) -> None:
    laptop = laptop_env(sshd, tmp_path / "home")
    work = tmp_path / "login-work"
    setup = sshd.setup(f"SLURM_CONF={shlex.quote(str(cluster.conf))}")
    hpc_train(laptop, "remote", "add", "c", "--host", GOOD, "--workdir", str(work), "--setup", setup, cwd=tmp_path)
    job = submitted_id(hpc_train(laptop, "submit", "--remote", "c", "--nodes", "1", "--name", "held", "--hold",
                                 "--", "python", "-c", "pass", cwd=tmp_path))
    cancelled = hpc_train(laptop, "cancel", job, "--remote", "c", cwd=tmp_path)
    assert cancelled.returncode == 0 and f"asked Slurm to cancel job {job} (held)" in cancelled.stdout, cancelled.stderr
    deadline = time.monotonic() + 30
    while f"job {job} (held): cancelled" not in (status := hpc_train(laptop, "status", job, "--remote", "c", cwd=tmp_path)).stdout:
        assert time.monotonic() < deadline, status.stdout + status.stderr
        time.sleep(0.5)
