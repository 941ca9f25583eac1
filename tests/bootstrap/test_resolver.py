"""Our ClusterResolver, and a real two-process MultiWorkerMirrored all-reduce over the bootstrap."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hpc_train.bootstrap import BootstrapOptions, compute_layout
from tests.net import free_port_block
from tests.fake_slurm import step_env, without_slurm

pytestmark = pytest.mark.tensorflow
TASK_SCRIPT = Path(__file__).with_name("allreduce_task.py")
LOCALHOST_PAIR = ["localhost", "localhost"]


def test_resolver_serves_the_layout_without_touching_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from hpc_train.bootstrap.resolver import LayoutClusterResolver

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "untouched")
    env = step_env("node[1-3]", "1(x3)", 2, extra={"SLURM_GPUS_ON_NODE": "2", "CUDA_VISIBLE_DEVICES": "0,1"})
    resolver = LayoutClusterResolver(compute_layout(env, BootstrapOptions(strategy="parameter_server", port_base=21000)))

    assert resolver.cluster_spec().as_dict() == {
        "chief": ["node1:21000"], "ps": ["node2:21001"], "worker": ["node3:21002"]}
    assert (resolver.task_type, resolver.task_id, resolver.rpc_layer) == ("worker", 0, "grpc")
    assert resolver.master() == "grpc://node3:21002"
    assert resolver.master("ps", 0, rpc_layer="") == "node2:21001"
    assert resolver.num_accelerators() == {"GPU": 2}
    import os
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "untouched"


def test_a_parameter_server_task_reports_no_accelerator() -> None:
    from hpc_train.bootstrap.resolver import LayoutClusterResolver

    env = step_env("node[1-3]", "1(x3)", 1, extra={"SLURM_GPUS_ON_NODE": "2"})
    resolver = LayoutClusterResolver(compute_layout(env, BootstrapOptions(strategy="parameter_server")))
    assert resolver.task_type == "ps"
    assert resolver.num_accelerators() == {}


def run_two_tasks(make_command) -> list[dict]:
    """Start ranks 0 and 1 of a one-node, two-task step at once; return what each printed."""
    base = free_port_block(2)
    processes = [
        subprocess.Popen(make_command(base), env={**without_slurm(), **step_env(
            "localhost", "2", rank, hosts_by_rank=LOCALHOST_PAIR)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        for rank in range(2)]
    outputs = []
    try:
        for process in processes:
            out, err = process.communicate(timeout=180)
            assert process.returncode == 0, err[-3000:]
            outputs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for process in processes:
            process.kill()
    return outputs


def test_two_tasks_form_one_cluster_through_tf_config() -> None:
    outputs = run_two_tasks(lambda base: [sys.executable, "-m", "hpc_train", "bootstrap", "--port-base", str(base),
                                          "--", sys.executable, str(TASK_SCRIPT), "tf_config"])
    assert outputs == [{"rank": 0, "sum": 3.0, "replicas": 2, "chief": True},
                       {"rank": 1, "sum": 3.0, "replicas": 2, "chief": False}]


def test_two_tasks_form_one_cluster_through_the_resolver() -> None:
    outputs = run_two_tasks(lambda base: [sys.executable, str(TASK_SCRIPT), "resolver", str(base)])
    assert [output["sum"] for output in outputs] == [3.0, 3.0]
    assert [output["chief"] for output in outputs] == [True, False]
