from __future__ import annotations

import pytest

from hpc_train.login.request import JobSpec, JobSpecError


@pytest.mark.parametrize("spec, tasks_per_node, tasks", [
    (JobSpec(nodes=4, gpus_per_node=2), 2, 8),  # one task per GPU
    (JobSpec(nodes=4, gpus_per_node=2, one_task_per_node=True), 1, 4),  # mirrored inside each node
    (JobSpec(nodes=3), 1, 3),  # CPU tasks
    (JobSpec(nodes=2, cpu_tasks_per_node=4), 4, 8),
])
def test_tasks_follow_the_gpus(spec: JobSpec, tasks_per_node: int, tasks: int) -> None:
    assert (spec.tasks_per_node, spec.num_tasks) == (tasks_per_node, tasks)


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
])
def test_impossible_requests_are_refused_before_slurm_sees_them(settings: dict, message: str | None) -> None:
    if message is None:
        JobSpec(**settings)
        return
    with pytest.raises(JobSpecError) as raised:
        JobSpec(**settings)
    assert message in str(raised.value) and "\n" not in str(raised.value)
