"""A heterogeneous step (srun --het-group=0,1): one consistent TF_CONFIG for every rank of every component.

The slurm_22_05_het/ files are what Slurm 22.05 set in each rank of a real step (a local cluster: component 0
`-N 2 -n 3` on node[1-2], component 1 `-N 2 --ntasks-per-node=2 --gres=gpu:2` on node[3-4]), trimmed to the
variables that matter; the other cases are built by hand from the same rules.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpc_train.bootstrap import BootstrapOptions, compute_layout, rank_environment
from hpc_train.bootstrap.hetstep import component_node_counts
from hpc_train.errors import HpcTrainError, SlurmEnvError
from tests.fake_slurm import step_env

CAPTURED = Path(__file__).parent / "slurm_22_05_het"
PS = BootstrapOptions(strategy="parameter_server", num_ps=2)


def captured(distribution: str, rank: int) -> dict[str, str]:
    lines = (CAPTURED / f"{distribution}.rank{rank}.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines)


def environments(distribution: str) -> list[dict[str, str]]:
    return [rank_environment(compute_layout(captured(distribution, rank), PS)) for rank in range(7)]


@pytest.mark.parametrize("distribution, workers, ps", [
    ("block", ["node3", "node3", "node4", "node4"], ["node1", "node2"]),
    # Cyclic goes round each component's nodes on its own: rank 2 is back on node1, not on node3.
    ("cyclic", ["node3", "node4", "node3", "node4"], ["node2", "node1"]),
])
def test_every_rank_of_a_real_het_step_agrees_on_one_cluster(distribution: str, workers: list[str],
                                                             ps: list[str]) -> None:
    configs = [json.loads(variables["TF_CONFIG"]) for variables in environments(distribution)]
    cluster = configs[0]["cluster"]
    assert all(config["cluster"] == cluster for config in configs)
    assert [address.split(":")[0] for address in cluster["chief"]] == ["node1"]
    assert [address.split(":")[0] for address in cluster["ps"]] == ps
    assert [address.split(":")[0] for address in cluster["worker"]] == workers
    tasks = [(config["task"]["type"], config["task"]["index"]) for config in configs]
    assert tasks == [("chief", 0), ("ps", 0), ("ps", 1), ("worker", 0), ("worker", 1), ("worker", 2), ("worker", 3)]
    addresses = [address for members in cluster.values() for address in members]
    assert len(set(addresses)) == 7  # ports unique per host (and here across the step)


@pytest.mark.parametrize("distribution", ["block", "cyclic"])
def test_component_0_sees_no_gpu_and_each_worker_its_own(distribution: str) -> None:
    devices = [variables["CUDA_VISIBLE_DEVICES"] for variables in environments(distribution)]
    assert devices[:3] == ["", "", ""]
    layouts = [compute_layout(captured(distribution, rank), PS) for rank in range(3, 7)]
    per_node = {(layout.me.host, variables) for layout, variables in zip(layouts, devices[3:])}
    assert per_node == {("node3", "0"), ("node3", "1"), ("node4", "0"), ("node4", "1")}


def test_the_layout_says_each_ranks_component() -> None:
    layout = compute_layout(captured("block", 0), PS)
    assert layout.components == (0, 0, 0, 1, 1, 1, 1) and layout.heterogeneous


def het_env(rank: int, **extra: str) -> dict[str, str]:
    """Component 0: cpu1 with 2 tasks (chief, 1 ps); component 1: gpu[1-2], 1 task each, 2 GPUs a node."""
    return step_env("cpu1,gpu[1-2]", "2,1(x2)", rank, extra={
        "SLURM_HET_SIZE": "2", "SLURM_JOB_NODELIST_HET_GROUP_0": "cpu1",
        "SLURM_JOB_NODELIST_HET_GROUP_1": "gpu[1-2]", **extra})


def test_the_components_decide_the_roles_not_num_ps() -> None:
    layout = compute_layout(het_env(0), PS)  # --num-ps 2, but component 0 holds 1 ps
    assert layout.roles == ("chief", "ps", "worker", "worker")
    assert any("component 0 runs the chief and 1 ps" in note for note in layout.notes)


def test_slurms_own_gpu_binding_is_kept_on_the_workers() -> None:
    gpu = {"SLURM_GPUS_ON_NODE": "2", "CUDA_VISIBLE_DEVICES": "0,1"}
    layout = compute_layout(het_env(2, **gpu), BootstrapOptions(strategy="parameter_server"))
    assert layout.me.role == "worker" and layout.me.devices == ("0", "1")
    assert layout.notes == ()


def test_multiworker_across_components_is_all_workers() -> None:
    layout = compute_layout(het_env(3), BootstrapOptions())
    assert set(layout.roles) == {"worker"} and layout.components == (0, 0, 1, 1)


def test_a_step_in_one_component_of_a_het_job_is_a_plain_step() -> None:
    env = step_env("gpu[1-2]", "1(x2)", 0, extra={
        "SLURM_HET_SIZE": "2", "SLURM_JOB_NODELIST_HET_GROUP_0": "cpu1",
        "SLURM_JOB_NODELIST_HET_GROUP_1": "gpu[1-2]"})
    layout = compute_layout(env, BootstrapOptions())
    assert layout.components == (0, 0) and not layout.heterogeneous


def test_a_component_0_without_room_for_a_ps_is_refused() -> None:
    env = step_env("cpu1,gpu[1-2]", "1(x3)", 0, extra={
        "SLURM_HET_SIZE": "2", "SLURM_JOB_NODELIST_HET_GROUP_0": "cpu1",
        "SLURM_JOB_NODELIST_HET_GROUP_1": "gpu[1-2]"})
    with pytest.raises(HpcTrainError, match="component 0 of the heterogeneous step runs 1 task"):
        compute_layout(env, BootstrapOptions(strategy="parameter_server"))


def test_a_step_not_made_of_whole_components_in_order_is_refused() -> None:
    env = {"SLURM_HET_SIZE": "2", "SLURM_JOB_NODELIST_HET_GROUP_0": "n[1-2]",
           "SLURM_JOB_NODELIST_HET_GROUP_1": "n3"}
    with pytest.raises(SlurmEnvError, match="one after the other"):
        component_node_counts(env, ("n3", "n1", "n2"))
