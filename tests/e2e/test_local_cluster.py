"""`hpc-train cluster up` on a real Slurm: GPUs through GRES, and `up` with other options restarts what changed."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from hpc_train.localslurm import control
from hpc_train.localslurm.spec import LocalCluster

pytestmark = pytest.mark.slurm_cluster
DIRECTORY = Path("/tmp/hpc-train-slurm-tests-reconfigure")
OPTIONS = ("--dir", str(DIRECTORY), "--cpus", "1")  # no --port: `up` takes free ones, the others read them


def cluster_command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpc_train", "cluster", *args, *OPTIONS], capture_output=True,
                          text=True, timeout=180)


def nodes_and_gres(cluster: LocalCluster) -> dict[str, str]:
    shown = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %G"], env=control.slurm_env(cluster), capture_output=True,
                           text=True, check=True).stdout
    return dict(line.split() for line in shown.splitlines())


def test_up_with_other_options_restarts_slurm_with_them_and_down_stops_every_node() -> None:
    if os.geteuid() != 0 or (shutil.which("slurmctld") is None and shutil.which("apt-get") is None):
        pytest.skip("a local Slurm cluster needs root, and Slurm or apt-get")
    first = LocalCluster(DIRECTORY, nodes="rc[1-2]", cpus=1, controller_port=7217)
    second = LocalCluster(DIRECTORY, nodes="rc[1-3]", cpus=1, controller_port=7217, gpus_per_node=1)
    try:
        up = cluster_command("up", "--nodes", first.nodes)
        assert up.returncode == 0, up.stderr
        assert nodes_and_gres(first) == {"rc1": "gpu:2", "rc2": "gpu:2"}
        assert all(stat.S_ISCHR(device.stat().st_mode) for device in first.gpu_devices)
        controller = control.running_pid(first, "slurmctld")
        again = cluster_command("up", "--nodes", first.nodes)  # the same options: nothing restarts
        assert again.returncode == 0 and control.running_pid(first, "slurmctld") == controller, again.stderr
        changed = cluster_command("up", "--nodes", second.nodes, "--gpus-per-node", "1")
        assert changed.returncode == 0, changed.stderr
        assert "runs with other options (slurm.conf, gres.conf changed): restarting" in changed.stderr
        assert control.running_pid(second, "slurmctld") not in (None, controller)
        assert nodes_and_gres(second) == {"rc1": "gpu:1", "rc2": "gpu:1", "rc3": "gpu:1"}
        fewer = cluster_command("up", "--nodes", "rc1", "--gpus-per-node", "1")
        assert fewer.returncode == 0, fewer.stderr
        assert control.running_pid(second, "slurmd-rc3") is None  # not left running with the old configuration
    finally:
        down = cluster_command("down", "--nodes", "rc1")
    assert down.returncode == 0, down.stderr
    assert not any(control.status(second).values())
