"""README's first command, for real: env/demo.sh sets up, starts a local Slurm, runs the 2-node job."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hpc_train.localslurm import control
from hpc_train.localslurm.spec import LocalCluster
from tests.fake_slurm import without_slurm
from tests.mnist_data import shared_mnist

pytestmark = [pytest.mark.slurm_cluster, pytest.mark.tensorflow]
ROOT = Path(__file__).resolve().parents[1]


def test_env_demo_runs_mnist_on_two_nodes_and_reports() -> None:
    if os.geteuid() != 0:
        pytest.skip("the demo's local Slurm cluster needs root")
    shared_mnist()
    default = LocalCluster()
    was_running = all(control.status(default).values())
    try:
        result = subprocess.run(["env/demo.sh", "--set", "epochs=2"], cwd=ROOT, env=without_slurm(),
                                capture_output=True, text=True, timeout=900)
    finally:
        if not was_running:
            control.down(default)
    output = result.stdout + result.stderr
    job = re.search(r"submitted slurm/mnist_2node.sh as job (\d+)", output)
    try:
        assert result.returncode == 0, output[-3000:]
        assert job, output[-3000:]
        assert "hpc-train: epoch 2/2" in output  # progress shown while it ran
        accuracy = re.search(r"result:  validation accuracy (\d\.\d+) after 2 epochs on 2 tasks \(multiworker\)",
                             output)
        assert accuracy and float(accuracy.group(1)) >= 0.9, output[-2000:]
        assert re.search(r"model:   runs/mnist-2node-\d+/model.keras", output)
        # Once trained, the job holds its nodes idle for a second or two, not for TensorFlow's teardown on each rank
        # (issue 48: under 5 s): the goodput ledger's measure of it.
        ledger = json.loads((ROOT / "runs" / f"mnist-2node-{job.group(1)}" / "ledger.json").read_text())
        assert ledger["total"]["idle"] < 5.0, ledger
    finally:
        if job:  # the demo writes where a user would: the project root
            (ROOT / f"slurm-mnist-2node-{job.group(1)}.out").unlink(missing_ok=True)
            shutil.rmtree(ROOT / "runs" / f"mnist-2node-{job.group(1)}", ignore_errors=True)
