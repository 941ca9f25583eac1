"""Reading one task's step from its variables."""

from __future__ import annotations

import pytest

from hpc_train.bootstrap.placement import Distribution
from hpc_train.bootstrap.slurm_env import read_slurm_step
from hpc_train.errors import SlurmEnvError
from tests.fake_slurm import step_env


def test_a_step_is_read_from_the_step_variables_even_inside_a_job() -> None:
    env = {**step_env("node[2-3]", "1(x2)", 1, distribution="cyclic"),
           "SLURM_JOB_NODELIST": "node[1-4]", "SLURM_TASKS_PER_NODE": "2(x4)", "SLURM_STEP_RESV_PORTS": "12000-12001"}
    step = read_slurm_step(env)
    assert (step.nodes, step.tasks_per_node, step.rank) == (("node2", "node3"), (1, 1), 1)
    assert step.distribution is Distribution.CYCLIC
    assert step.reserved_ports == (12000, 12001)
    assert step.note is None


def test_the_batch_shell_is_rank_0_of_the_jobs_allocation() -> None:
    step = read_slurm_step({"SLURM_JOB_NODELIST": "node[1-2]", "SLURM_TASKS_PER_NODE": "2(x2)",
                            "SLURM_NTASKS": "4", "SLURM_JOB_NUM_NODES": "2"})
    assert (step.rank, step.num_tasks) == (0, 4)
    assert step.note is not None and "SLURM_JOB_NODELIST" in step.note


@pytest.mark.parametrize("changes, message", [
    ({"SLURM_STEP_NUM_NODES": "3"}, "SLURM_STEP_NUM_NODES='3': but SLURM_STEP_NODELIST names 2"),
    ({"SLURM_STEP_NUM_TASKS": "3"}, "SLURM_STEP_NUM_TASKS='3': but SLURM_STEP_TASKS_PER_NODE adds up to 4"),
    ({"SLURM_JOB_ID": "12a"}, "SLURM_JOB_ID='12a': not a whole number"),
])
def test_counts_slurm_gives_must_agree_with_its_lists(changes: dict[str, str], message: str) -> None:
    with pytest.raises(SlurmEnvError) as raised:
        read_slurm_step(step_env("n[1-2]", "2(x2)", 0, extra=changes))
    assert str(raised.value).startswith(message)


def test_a_missing_tasks_per_node_says_to_use_srun() -> None:
    env = step_env("n[1-2]", "2(x2)", 0)
    del env["SLURM_STEP_TASKS_PER_NODE"]
    with pytest.raises(SlurmEnvError, match="SLURM_STEP_TASKS_PER_NODE is not set: .*srun"):
        read_slurm_step(env)
