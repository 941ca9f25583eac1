"""Exporting a layout: the variables, the one side effect, the table."""

from __future__ import annotations

import json

from hpc_train.bootstrap import (BootstrapOptions, apply_to_environ, compute_layout, describe_rank, format_table,
                                 task_environment)
from tests.fake_slurm import step_env


def test_apply_exports_tf_config_and_this_tasks_gpus_into_the_mapping() -> None:
    environ = step_env("g[1-2]", "2(x2)", 1, extra={"SLURM_GPUS_ON_NODE": "2", "CUDA_VISIBLE_DEVICES": "0,1",
                                                     "HOME": "/home/me"})
    layout = apply_to_environ(environ, BootstrapOptions(port_base=20000))
    assert layout.me.rank == 1
    assert json.loads(environ["TF_CONFIG"]) == {
        "cluster": {"worker": ["g1:20000", "g1:20001", "g2:20002", "g2:20003"]},
        "task": {"type": "worker", "index": 1}, "rpc_layer": "grpc"}
    assert environ["CUDA_VISIBLE_DEVICES"] == "1"
    assert environ["HOME"] == "/home/me"


def test_a_binding_slurm_made_is_not_overwritten() -> None:
    environ = step_env("g1", "2", 0, extra={"SLURM_GPUS_ON_NODE": "2", "CUDA_VISIBLE_DEVICES": "1"})
    apply_to_environ(environ)
    assert environ["CUDA_VISIBLE_DEVICES"] == "1"


def test_parameter_servers_are_masked_from_gpus() -> None:
    layout = compute_layout(step_env("g[1-3]", "1(x3)", 1, extra={"SLURM_GPUS_ON_NODE": "4"}),
                            BootstrapOptions(strategy="parameter_server"))
    assert layout.me.role == "ps"
    assert task_environment(layout)["CUDA_VISIBLE_DEVICES"] == ""


def test_cpu_nodes_without_gpu_variables_export_only_tf_config() -> None:
    assert set(task_environment(compute_layout(step_env("c1", "1", 0)))) == {"TF_CONFIG"}


def test_the_rank_line_says_which_gpus_it_sees_none_when_it_is_bound_to_none() -> None:
    """(issue 46, 5) a rank bound to no GPU printed `GPUs: as Slurm set them`."""
    cpu = compute_layout(step_env("c1", "1", 0))
    assert describe_rank(cpu, "").endswith("GPUs: none")
    assert describe_rank(cpu, None).endswith("GPUs: none bound (no CUDA_VISIBLE_DEVICES: any GPU of the node is "
                                             "visible)")
    kept = compute_layout(step_env("g1", "2", 0, extra={"SLURM_GPUS_ON_NODE": "2", "CUDA_VISIBLE_DEVICES": "1"}))
    assert describe_rank(kept, "1").endswith("GPUs: 1 (as Slurm set them)")
    ps = compute_layout(step_env("g[1-3]", "1(x3)", 1, extra={"SLURM_GPUS_ON_NODE": "4"}),
                        BootstrapOptions(strategy="parameter_server"))
    assert describe_rank(ps, "0,1,2,3").endswith("GPUs: none")  # masked: its own binding, whatever Slurm set


def test_the_table_marks_this_task_and_names_the_port_rule() -> None:
    table = format_table(compute_layout(step_env("c[1-2]", "1(x2)", 1, job_id=1), BootstrapOptions()))
    assert table.splitlines() == [
        "# multiworker, 2 tasks, ports: SLURM_JOB_ID=1: window 16392-16399",
        "   rank  role    index  host  port   node  local  devices",
        "   0     worker  0      c1    16392  0     0      (as set)",
        "*  1     worker  1      c2    16393  1     0      (as set)",
    ]
