from __future__ import annotations

import pytest

from hpc_train.spec.request import Group, JobRequest, JobSpecError

one_group = JobRequest.one_group


@pytest.mark.parametrize("spec, tasks_per_node, tasks", [
    (one_group(nodes=4, gpus_per_node=2), 2, 8),  # one task per GPU
    (one_group(nodes=4, gpus_per_node=2, one_task_per_node=True), 1, 4),  # mirrored inside each node
    (one_group(nodes=3), 1, 3),  # CPU tasks
    (one_group(nodes=2, cpu_tasks_per_node=4), 4, 8),
])
def test_tasks_follow_the_gpus(spec: JobRequest, tasks_per_node: int, tasks: int) -> None:
    assert (spec.group.tasks_per_node, spec.num_tasks) == (tasks_per_node, tasks)


@pytest.mark.parametrize("settings, message", [
    ({"nodes": 0}, "--nodes 0: must be a whole number of 1 or more"),
    ({"nodes": 2, "gpus_per_node": -1}, "--gpus-per-node -1"),
    ({"nodes": 1, "strategy": "parameter_server", "num_ps": 1}, "--num-ps 1 needs at least 3 tasks"),
    ({"nodes": 2, "gpus_per_node": 2, "gres": "gpu:4"}, "--gres 'gpu:4' asks for 4 GPUs per node but"),
    ({"nodes": 2, "gpus_per_node": 2, "gres": "gpu:a100:2,shard:1"}, None),
    ({"nodes": 1, "gres": "gpu:x"}, "expected gpu:N or gpu:TYPE:N"),
    ({"nodes": 1, "time": "1h"}, "--time '1h': not a Slurm time"),
    ({"nodes": 1, "time": "1-12:00:00"}, None),
    ({"nodes": 1, "name": "a\n#SBATCH --exclusive"}, "line break or control character"),
    ({"nodes": 1, "name": "../escape"}, "no '/' and no leading '.'"),
    ({"nodes": 1, "partition": ""}, "--partition ''"),
    ({"nodes": 1, "cpus_per_task": 0}, "--cpus-per-task 0"),
    ({"nodes": 1, "strategy": "mirrored"}, "--strategy 'mirrored': expected multiworker or parameter_server"),
    ({"nodes": 1, "keras": "4"}, "--keras '4' --command-signal 'USR1': expected auto, 2 or 3, and USR1 or TERM"),
])
def test_impossible_requests_are_refused_before_slurm_sees_them(settings: dict, message: str | None) -> None:
    if message is None:
        one_group(**settings)
        return
    with pytest.raises(JobSpecError) as raised:
        one_group(**settings)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_job_of_two_groups_counts_every_task_and_is_refused_where_one_is_needed() -> None:
    chief_and_ps = Group(nodes=1, cpu_tasks_per_node=2, partition="cpu", roles=("chief", "ps"))
    workers = Group(nodes=2, gpus_per_node=4, partition="gpu", roles=("worker",))
    request = JobRequest((chief_and_ps, workers), strategy="parameter_server", num_ps=1)
    assert (request.nodes, request.num_tasks) == (3, 10)
    with pytest.raises(JobSpecError, match="a job of 2 groups of nodes"):
        request.group
    with pytest.raises(JobSpecError, match=r"--num-ps 3 needs at least 5 tasks .* but 1 node\(s\) x 2 task\(s\) \+ "
                                           r"1 node\(s\) x 1 task\(s\) give 3"):
        JobRequest((chief_and_ps, Group(nodes=1)), strategy="parameter_server", num_ps=3)
    with pytest.raises(JobSpecError, match="at least one group"):
        JobRequest(())
    with pytest.raises(JobSpecError, match="roles boss"):
        Group(nodes=1, roles=("boss",))
