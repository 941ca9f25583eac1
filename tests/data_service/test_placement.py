"""Whether the CPUs a job holds on its nodes fit its data workers' step (pure), and the one line when they do not."""

from __future__ import annotations

import pytest

from hpc_train.data_service.placement import held, misfit, node_cpus, per_node


@pytest.mark.parametrize("text, cpus", [("4(x2),2", (4, 4, 2)), ("1", (1,)), ("", None), ("4(x2", None)])
def test_each_nodes_cpus_as_slurm_lists_them(text: str, cpus: tuple[int, ...] | None) -> None:
    assert node_cpus(text) == cpus


def test_the_nodes_held_pair_slurms_lists_and_a_het_jobs_first_component_wins() -> None:
    env = {"SLURM_JOB_CPUS_PER_NODE": "3,2", "SLURM_JOB_NODELIST": "node[1-2]"}
    assert held(env) == [("node1", 3), ("node2", 2)]
    assert held({**env, "SLURM_JOB_CPUS_PER_NODE_HET_GROUP_0": "4", "SLURM_JOB_NODELIST_HET_GROUP_0": "cpu1"}) == \
        [("cpu1", 4)]
    assert held({"SLURM_JOB_NODELIST": "node1"}) is None
    assert held({**env, "SLURM_JOB_CPUS_PER_NODE": "3"}) is None  # (lists that do not pair: nothing to judge by)


@pytest.mark.parametrize("workers, nodes, counts", [(2, 1, [2]), (2, 2, [1, 1]), (3, 2, [2, 1]), (1, 4, [1]),
                                                    (5, 3, [2, 2, 1])])
def test_srun_puts_the_workers_cyclic_over_at_most_as_many_nodes(workers: int, nodes: int, counts: list[int]) -> None:
    assert per_node(workers, nodes) == counts


def test_workers_that_fit_in_the_cpus_held_have_no_problem() -> None:
    assert misfit([("node1", 3)], 2, 1) is None  # (they may share the rank's: srun --overlap)
    assert misfit([("node1", 1), ("node2", 4)], 1, 4) is None  # (the roomiest node takes the lone one)
    assert misfit([("node1", 2), ("node2", 1)], 3, 1) is None
    assert misfit([], 8, 8) is None  # (nothing to judge by: srun says)


def test_two_workers_on_a_one_cpu_node_are_named_with_the_fix() -> None:
    """What happened before the request counted them: a one-node job held 1 CPU, srun refused the workers' step."""
    line = misfit([("node1", 1)], 2, 1)
    assert line == ("its 2 data worker(s) of 1 CPU(s) need 2 CPU(s) on node1 (2 of them there), and this job holds "
                    "1 there; ask for fewer (--data-workers, --data-cpus), whole nodes (--exclusive), or a partition "
                    "of their own (--data-partition P)")


def test_a_fixed_cpus_per_task_is_named_as_the_cap() -> None:
    line = misfit([("node1", 4), ("node2", 4)], 3, 4, cpus_per_task="4")
    assert line is not None and line.startswith("its 3 data worker(s) of 4 CPU(s) need 8 CPU(s) on node")
    assert "(with --cpus-per-task 4, Slurm gives a node --ntasks-per-node x --cpus-per-task CPUs" in line
    assert "--cpus-per-task" not in (misfit([("node1", 1)], 2, 1, cpus_per_task="1") or "")
