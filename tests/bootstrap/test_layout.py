"""Table-driven: the full TF_CONFIG and devices of every task of a step.

Each case lists what every rank must get, written out by hand from Slurm's rules;
the test builds every rank's environment as srun would and compares.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from hpc_train.bootstrap import BootstrapOptions, compute_layout, task_environment, tf_config
from tests.fake_slurm import step_env

ALL_GPUS_8 = {"SLURM_GPUS_ON_NODE": "8", "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}


@dataclass(frozen=True)
class Case:
    name: str
    nodelist: str
    tasks_per_node: str
    # Every rank's (host, port, role, index, CUDA_VISIBLE_DEVICES or None for "left alone").
    expected: list[tuple[str, int, str, int, str | None]]
    options: BootstrapOptions = BootstrapOptions(port_base=20000)
    distribution: str | None = None
    extra: dict[str, str] = field(default_factory=dict)
    job_id: int = 4242


W = "worker"
CASES = [
    Case("block 2x2", "node[1-2]", "2(x2)", [
        ("node1", 20000, W, 0, None), ("node1", 20001, W, 1, None),
        ("node2", 20002, W, 2, None), ("node2", 20003, W, 3, None)], distribution="block"),
    Case("cyclic 2x2", "node[1-2]", "2(x2)", [
        ("node1", 20000, W, 0, None), ("node2", 20001, W, 1, None),
        ("node1", 20002, W, 2, None), ("node2", 20003, W, 3, None)], distribution="cyclic"),
    Case("block 2(x3),1", "n[1-4]", "2(x3),1", [
        ("n1", 20000, W, 0, None), ("n1", 20001, W, 1, None), ("n2", 20002, W, 2, None),
        ("n2", 20003, W, 3, None), ("n3", 20004, W, 4, None), ("n3", 20005, W, 5, None),
        ("n4", 20006, W, 6, None)], distribution="block:cyclic"),
    Case("cyclic 2(x3),1 skips the full node", "n[1-4]", "2(x3),1", [
        ("n1", 20000, W, 0, None), ("n2", 20001, W, 1, None), ("n3", 20002, W, 2, None),
        ("n4", 20003, W, 3, None), ("n1", 20004, W, 4, None), ("n2", 20005, W, 5, None),
        ("n3", 20006, W, 6, None)], distribution="cyclic:block,Pack"),
    Case("node[9-10] keeps Slurm's order", "node[9-10]", "1(x2)", [
        ("node9", 20000, W, 0, None), ("node10", 20001, W, 1, None)]),
    Case("zero-padded gpu[001-004], 2 GPUs a node", "gpu[001-004]", "2(x4)", [
        ("gpu001", 20000, W, 0, "0"), ("gpu001", 20001, W, 1, "1"),
        ("gpu002", 20002, W, 2, "0"), ("gpu002", 20003, W, 3, "1"),
        ("gpu003", 20004, W, 4, "0"), ("gpu003", 20005, W, 5, "1"),
        ("gpu004", 20006, W, 6, "0"), ("gpu004", 20007, W, 7, "1")],
        extra={"SLURM_GPUS_ON_NODE": "2", "SLURM_STEP_GPUS": "0,1", "CUDA_VISIBLE_DEVICES": "0,1"}),
    Case("several ranges a[1-2],b[5,7-8]", "a[1-2],b[5,7-8]", "1(x5)", [
        ("a1", 20000, W, 0, None), ("a2", 20001, W, 1, None), ("b5", 20002, W, 2, None),
        ("b7", 20003, W, 3, None), ("b8", 20004, W, 4, None)]),
    Case("1 node x 8 tasks, 8 GPUs", "dgx01", "8", [
        ("dgx01", 20000 + i, W, i, str(i)) for i in range(8)], extra=ALL_GPUS_8),
    Case("1 node x 2 tasks, 8 GPUs: 4 each", "dgx01", "2", [
        ("dgx01", 20000, W, 0, "0,1,2,3"), ("dgx01", 20001, W, 1, "4,5,6,7")], extra=ALL_GPUS_8),
    Case("CPU-only nodes, no GPU variable: devices left alone", "cpu[1-2]", "2(x2)", [
        ("cpu1", 20000, W, 0, None), ("cpu1", 20001, W, 1, None),
        ("cpu2", 20002, W, 2, None), ("cpu2", 20003, W, 3, None)]),
    Case("CPU-only nodes Slurm says have 0 GPUs", "cpu[1-2]", "1(x2)", [
        ("cpu1", 20000, W, 0, ""), ("cpu2", 20001, W, 1, "")], extra={"SLURM_GPUS_ON_NODE": "0"}),
    Case("cgroup-renumbered GPUs: shares cut from CUDA_VISIBLE_DEVICES", "g1", "2", [
        ("g1", 20000, W, 0, "0"), ("g1", 20001, W, 1, "1")],
        extra={"SLURM_STEP_GPUS": "4,5", "CUDA_VISIBLE_DEVICES": "0,1"}),
    Case("GPUs Slurm bound per task are kept", "g[1-2]", "2(x2)", [
        ("g1", 20000, W, 0, None), ("g1", 20001, W, 1, None),
        ("g2", 20002, W, 2, None), ("g2", 20003, W, 3, None)],
        extra={"SLURM_GPUS_ON_NODE": "2", "CUDA_VISIBLE_DEVICES": "1"}),
    Case("parameter server: chief, 1 ps, 2 workers; only workers get GPUs", "node[1-4]", "1(x4)", [
        ("node1", 20000, "chief", 0, ""), ("node2", 20001, "ps", 0, ""),
        ("node3", 20002, W, 0, "0,1"), ("node4", 20003, W, 1, "0,1")],
        options=BootstrapOptions(strategy="parameter_server", port_base=20000),
        extra={"SLURM_GPUS_ON_NODE": "2", "CUDA_VISIBLE_DEVICES": "0,1"}),
    Case("parameter server: 2 ps over 3 nodes, cyclic", "node[1-3]", "2(x3)", [
        ("node1", 20000, "chief", 0, ""), ("node2", 20001, "ps", 0, ""), ("node3", 20002, "ps", 1, ""),
        ("node1", 20003, W, 0, None), ("node2", 20004, W, 1, None), ("node3", 20005, W, 2, None)],
        options=BootstrapOptions(strategy="parameter_server", num_ps=2, port_base=20000), distribution="cyclic"),
    Case("ports from the job id: 1234 mod 2048 windows of 8", "node[1-2]", "2(x2)", [
        ("node1", 26256, W, 0, None), ("node1", 26257, W, 1, None),
        ("node2", 26258, W, 2, None), ("node2", 26259, W, 3, None)],
        options=BootstrapOptions(), job_id=1234),
    Case("ports from srun --resv-ports, one per task of the step", "node[1-2]", "2(x2)", [
        ("node1", 12000, W, 0, None), ("node1", 12001, W, 1, None),
        ("node2", 12002, W, 2, None), ("node2", 12005, W, 3, None)],
        options=BootstrapOptions(), extra={"SLURM_STEP_RESV_PORTS": "12000-12002,12005"}),
    Case("ports from srun --resv-ports, one per task of a node", "node[1-2]", "2(x2)", [
        ("node1", 12000, W, 0, None), ("node1", 12001, W, 1, None),
        ("node2", 12000, W, 2, None), ("node2", 12001, W, 3, None)],
        options=BootstrapOptions(), extra={"SLURM_STEP_RESV_PORTS": "12000-12001"}),
]


def expected_tf_config(case: Case, rank: int) -> dict[str, Any]:
    cluster: dict[str, list[str]] = {}
    for role in ("chief", "ps", "worker"):
        addresses = [f"{host}:{port}" for host, port, r, _, _ in case.expected if r == role]
        if addresses:
            cluster[role] = addresses
    _, _, role, index, _ = case.expected[rank]
    return {"cluster": cluster, "task": {"type": role, "index": index}, "rpc_layer": "grpc"}


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_every_task_gets_its_tf_config_and_devices(case: Case) -> None:
    hosts = [host for host, *_ in case.expected]
    for rank in range(len(case.expected)):
        env = step_env(case.nodelist, case.tasks_per_node, rank, hosts_by_rank=hosts, job_id=case.job_id,
                       distribution=case.distribution, extra=case.extra)
        layout = compute_layout(env, case.options)

        assert tf_config(layout) == expected_tf_config(case, rank), f"rank {rank}"
        exported = task_environment(layout)
        assert exported.get("CUDA_VISIBLE_DEVICES") == case.expected[rank][4], f"rank {rank}"


def test_a_task_knows_which_one_it_is() -> None:
    env = step_env("node[1-2]", "2(x2)", 3, hosts_by_rank=["node1", "node1", "node2", "node2"])
    me = compute_layout(env).me
    assert (me.rank, me.host, me.node_index, me.local_index) == (3, "node2", 1, 1)


def test_the_batch_shell_falls_back_to_the_job_variables_and_says_so() -> None:
    env = {"SLURM_JOB_NODELIST": "node[1-2]", "SLURM_TASKS_PER_NODE": "2(x2)", "SLURM_NTASKS": "4",
           "SLURM_JOB_ID": "7", "SLURM_NODEID": "0", "SLURMD_NODENAME": "node1"}
    layout = compute_layout(env, BootstrapOptions(port_base=20000))
    assert layout.rank == 0
    assert layout.cluster() == {"worker": ["node1:20000", "node1:20001", "node2:20002", "node2:20003"]}
    assert any("SLURM_STEP_NODELIST" in note and "srun" in note for note in layout.notes)


def test_a_step_gives_no_note() -> None:
    assert compute_layout(step_env("node1", "1", 0)).notes == ()


def test_idle_gpus_are_noted() -> None:
    env = step_env("g1", "3", 0, extra={"SLURM_GPUS_ON_NODE": "8"})
    layout = compute_layout(env)
    assert [task.devices for task in layout.tasks] == [("0", "1"), ("2", "3"), ("4", "5")]
    assert layout.notes == ("8 GPUs for 3 tasks on g1: 2 each, 2 left idle",)
