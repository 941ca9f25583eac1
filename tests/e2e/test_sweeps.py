"""A sweep on a real Slurm: one `hpc-train submit --sweep` is one job array, each element its own job."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpc_train.jobs.follow import element_states
from hpc_train.localslurm import control
from hpc_train.localslurm.spec import LocalCluster
from tests.e2e.jobs import FINAL_STATES, JOB_TIMEOUT
from tests.fake_slurm import without_slurm

pytestmark = pytest.mark.slurm_cluster
ROOT = Path(__file__).resolve().parents[2]
SAYS = "import os; print('seed', {seed}, os.environ['HPC_TRAIN_SWEEP_SEED'], os.environ['HPC_TRAIN_TRIAL'])"


def test_a_command_sweep_runs_each_element_with_its_values_at_most_k_at_once(cluster: LocalCluster,
                                                                              tmp_path: Path) -> None:
    env = {**without_slurm(), **control.slurm_env(cluster), "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    submitted = subprocess.run(["hpc-train", "submit", "--nodes", "1", "--name", "sw", "--sweep", "seed=1,2,3",
                                "--max-parallel", "2", "--", sys.executable, "-c", SAYS], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=120)
    assert submitted.returncode == 0, submitted.stderr
    array = submitted.stdout.splitlines()[0]
    deadline, most_running = time.monotonic() + JOB_TIMEOUT, 0
    while True:
        states = element_states(array, 3, env)
        most_running = max(most_running, list(states.values()).count("RUNNING"))
        if all(state in FINAL_STATES for state in states.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert states == {0: "COMPLETED", 1: "COMPLETED", 2: "COMPLETED"}, states
    assert most_running <= 2
    for index, seed in enumerate((1, 2, 3)):
        log = (tmp_path / "runs" / f"sw-{array}_{index}" / "logs" / "rank-0.out").read_text()
        assert f"seed {seed} {seed} {index}" in log, log
    status = subprocess.run(["hpc-train", "status", array], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert status.stdout.splitlines()[0] == f"sweep {array} (sw): 3 elements: 3 completed", status.stdout
