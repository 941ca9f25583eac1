"""A sweep on a real Slurm: one `hpc-train submit --sweep` is one job array, each element its own job."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpc_train.slurm.client import SlurmClient
from hpc_train.slurm.follow import element_states
from hpc_train.localslurm import control
from hpc_train.localslurm.spec import LocalCluster
from tests.e2e.jobs import FINAL_STATES, JOB_TIMEOUT
from tests.fake_slurm import without_slurm

pytestmark = pytest.mark.slurm_cluster
ROOT = Path(__file__).resolve().parents[2]
# Says its values (a key of its own, issue 46); the element with nap 2 fails (its values make it fail), alone.
SAYS = ("import os, sys; print('nap', {nap}, os.environ['HPC_TRAIN_SWEEP_NAP'], os.environ['HPC_TRAIN_TRIAL']); "
        "sys.exit(3 if {nap} == 2 else 0)")


def wait_for_elements(array: str, count: int, env: dict[str, str]) -> tuple[dict[int, str], int]:
    """Each element's final state, and the most that ran at once."""
    deadline, most_running = time.monotonic() + JOB_TIMEOUT, 0
    while True:
        states = element_states(array, count, SlurmClient.local(env))
        most_running = max(most_running, list(states.values()).count("RUNNING"))
        if all(state in FINAL_STATES for state in states.values()) or time.monotonic() > deadline:
            return states, most_running
        time.sleep(0.2)


def test_a_command_sweep_runs_each_element_with_its_values_at_most_k_at_once(cluster: LocalCluster,
                                                                              tmp_path: Path) -> None:
    env = {**without_slurm(), **control.slurm_env(cluster), "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    submitted = subprocess.run(["hpc-train", "submit", "--nodes", "1", "--name", "sw", "--sweep", "nap=1,2,3",
                                "--max-parallel", "2", "--", sys.executable, "-c", SAYS], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=120)
    assert submitted.returncode == 0, submitted.stderr
    array = submitted.stdout.splitlines()[0]
    states, most_running = wait_for_elements(array, 3, env)
    assert states == {0: "COMPLETED", 1: "FAILED", 2: "COMPLETED"}, states
    assert most_running <= 2
    for index, seed in enumerate((1, 2, 3)):
        log = (tmp_path / "runs" / f"sw-{array}_{index}" / "logs" / "rank-0.out").read_text()
        assert f"nap {seed} {seed} {index}" in log, log
    status = subprocess.run(["hpc-train", "status", array], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert status.stdout.splitlines()[0] == f"sweep {array} (sw): 3 elements: 2 completed, 1 failed", status.stdout


def test_a_random_search_from_yaml_runs_its_trials_with_their_drawn_values(cluster: LocalCluster,
                                                                           tmp_path: Path) -> None:
    env = {**without_slurm(), **control.slurm_env(cluster), "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    config = tmp_path / "sweep.yaml"
    config.write_text("sweep:\n  random:\n    trials: 3\n    seed: 5\n    space:\n"
                      "      learning_rate: loguniform(1e-4, 1e-1)\n")
    submitted = subprocess.run(["hpc-train", "submit", "--nodes", "1", "--name", "rs", "--config", str(config), "--",
                                sys.executable, "-c", "print('lr', {learning_rate})"], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=120)
    assert submitted.returncode == 0, submitted.stderr
    array = submitted.stdout.splitlines()[0]
    states, _ = wait_for_elements(array, 3, env)
    assert set(states.values()) == {"COMPLETED"}, states
    from hpc_train.spec.sweep import random_search, value_text

    drawn = random_search({"learning_rate": "loguniform(1e-4, 1e-1)"}, 3, 5).elements
    for index, values in enumerate(drawn):
        log = (tmp_path / "runs" / f"rs-{array}_{index}" / "logs" / "rank-0.out").read_text()
        assert f"lr {value_text(values['learning_rate'])}" in log, log


@pytest.mark.tensorflow
def test_a_trainer_grid_runs_every_element_and_one_requeued_mid_epoch_resumes_exactly(cluster: LocalCluster,
                                                                                      tmp_path: Path) -> None:
    import json
    import re

    from tests.mnist_data import shared_mnist

    env = {**without_slurm(), **control.slurm_env(cluster), "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    # Elements 0 and 2 are the same run (seed 3, learning rate 0.002): 2 is warned mid-epoch, requeued, resumed.
    # (At most 2 at once: 2 starts as 0 or 1 ends. Two keys' product: tests/spec/test_sweep.py.)
    submitted = subprocess.run(["hpc-train", "submit", "--nodes", "1", "--name", "grid", "--set", "seed=3",
                                "--sweep", "learning_rate=0.002,0.001,0.002", "--max-parallel", "2", "--set", "epochs=3",
                                "--set", "train_images=2000", "--set", f"data_dir={shared_mnist()}"],
                               cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert submitted.returncode == 0, submitted.stderr
    array = submitted.stdout.splitlines()[0]
    log = tmp_path / "runs" / f"grid-{array}_2" / "logs" / "rank-0.out"
    deadline = time.monotonic() + JOB_TIMEOUT
    while "epoch 1/3" not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, element_states(array, 3, SlurmClient.local(env))
        time.sleep(0.2)
    subprocess.run(["scancel", "--signal=USR1", f"{array}_2"], env=env, check=True)  # the time-limit warning
    states, most_running = wait_for_elements(array, 3, env)
    assert states == {index: "COMPLETED" for index in range(3)} and most_running <= 2, states
    runs = [tmp_path / "runs" / f"grid-{array}_{index}" for index in range(3)]
    values = [(json.loads((run / "metrics.json").read_text())["config"]["learning_rate"],) for run in runs]
    assert values == [(0.002,), (0.001,), (0.002,)]
    digests = [re.findall(r"finished; weights digest (\w+)", (run / "logs" / "rank-0.out").read_text()) for run in runs]
    assert "requeueing job" in log.read_text() and digests[2] == digests[0] and digests[1] != digests[0], digests


@pytest.mark.tensorflow
def test_pruning_stops_the_element_that_learns_worse_and_the_report_shows_where(cluster: LocalCluster,
                                                                                tmp_path: Path) -> None:
    import json

    from tests.mnist_data import shared_mnist

    env = {**without_slurm(), **control.slurm_env(cluster), "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    # One at a time: element 1 (a learning rate far too small) reaches epoch 1 after element 0 got there.
    submitted = subprocess.run(["hpc-train", "submit", "--nodes", "1", "--name", "pr", "--sweep",
                                "learning_rate=0.002,0.000001", "--max-parallel", "1", "--prune", "halving",
                                "--set", "epochs=3", "--set", "train_images=1000", "--set", f"data_dir={shared_mnist()}"],
                               cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert submitted.returncode == 0, submitted.stderr
    array = submitted.stdout.splitlines()[0]
    states, _ = wait_for_elements(array, 2, env)
    assert states == {0: "COMPLETED", 1: "COMPLETED"}, states
    runs = [tmp_path / "runs" / f"pr-{array}_{index}" for index in range(2)]
    assert json.loads((runs[0] / "state.json").read_text())["state"] == "finished"
    pruned = json.loads((runs[1] / "state.json").read_text())
    assert (pruned["state"], pruned["epoch"]) == ("pruned", 1) and Path(pruned["checkpoint"] + ".index").is_file()
    said = (runs[1] / "logs" / "rank-0.out").read_text()
    assert "hpc-train: pruned after epoch 1/3: val_accuracy" in said and "Optuna's halving pruner stops it" in said
    assert [epoch["epoch"] for epoch in json.loads((runs[1] / "metrics.json").read_text())["epochs"]] == [1]
    status = subprocess.run(["hpc-train", "status", array], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert f"sweep {array} (pr): 2 elements: 1 completed, 1 pruned" in status.stdout, status.stdout
    report = subprocess.run(["hpc-train", "report", array], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert "best (highest val_accuracy): element 0: learning_rate=0.002" in report.stdout, report.stdout + report.stderr
    assert "pruned@1" in report.stdout and (tmp_path / "runs" / f"pr-{array}" / "sweep.png").is_file()
