from __future__ import annotations

import pytest

from hpc_train.bootstrap.nodelist import expand_nodelist, expand_port_list, expand_tasks_per_node
from hpc_train.errors import SlurmEnvError


@pytest.mark.parametrize("value, nodes", [
    ("node[9-10]", ("node9", "node10")),
    ("gpu[001-004]", ("gpu001", "gpu002", "gpu003", "gpu004")),
    ("a[1-2],b[5,7-8]", ("a1", "a2", "b5", "b7", "b8")),
    ("node10,node9", ("node10", "node9")),  # Slurm's order is kept, never sorted
    ("n[1-2]-ib", ("n1-ib", "n2-ib")),
    ("solo", ("solo",)),
])
def test_node_lists_expand_in_slurm_order(value: str, nodes: tuple[str, ...]) -> None:
    assert expand_nodelist("SLURM_STEP_NODELIST", value) == nodes


@pytest.mark.parametrize("value, problem", [
    ("node[1-", "unbalanced brackets"), ("node[3-1]", "start > stop"), ("", "empty"),
    ("   ", "empty"), ("node[a-b]", "bad range"), ("x,x", "listed twice"), ("n[[1]]", "nested"),
])
def test_bad_node_lists_name_the_variable_and_value(value: str, problem: str) -> None:
    with pytest.raises(SlurmEnvError, match=problem) as raised:
        expand_nodelist("SLURM_JOB_NODELIST", value)
    assert str(raised.value).startswith(f"SLURM_JOB_NODELIST={value!r}: ")


@pytest.mark.parametrize("value, counts", [
    ("2(x3),1", (2, 2, 2, 1)), ("8", (8,)), ("1,2,3", (1, 2, 3)), ("4(x2)", (4, 4)),
])
def test_tasks_per_node_expand(value: str, counts: tuple[int, ...]) -> None:
    assert expand_tasks_per_node("SLURM_STEP_TASKS_PER_NODE", value) == counts


@pytest.mark.parametrize("value", ["", "x", "2(x)", "0", "2(x0)", "-1", "2;3"])
def test_bad_tasks_per_node_are_refused(value: str) -> None:
    with pytest.raises(SlurmEnvError, match="SLURM_STEP_TASKS_PER_NODE"):
        expand_tasks_per_node("SLURM_STEP_TASKS_PER_NODE", value)


def test_reserved_port_lists_expand() -> None:
    assert expand_port_list("P", "12000-12002,12010") == (12000, 12001, 12002, 12010)


@pytest.mark.parametrize("value", ["12000-", "a", "0", "70000", "12003-12001"])
def test_bad_port_lists_are_refused(value: str) -> None:
    with pytest.raises(SlurmEnvError, match="P="):
        expand_port_list("P", value)
