"""What a job asks of Slurm: the CPUs of a data service beside the ranks counted in each node's request (pure)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hpc_train.spec.data_service import DataService
from hpc_train.spec.directives import directive_lines, directives, service_cpus
from hpc_train.spec.request import Group, JobRequest, JobSpec


@pytest.mark.parametrize("workers, nodes, cpus, per_node", [
    (2, 1, 1, 2),  # both workers on the one node
    (2, 2, 1, 1),  # cyclic: one a node
    (3, 2, 2, 4),  # ceil(3 / 2) = 2 on a node, 2 CPUs each
    (1, 4, 3, 3),  # a lone worker: its CPUs on every node (srun may put it on any)
    (8, 3, 1, 3),
])
def test_the_workers_cpus_on_a_node_are_ceil_w_over_n_of_c(workers: int, nodes: int, cpus: int,
                                                          per_node: int) -> None:
    assert DataService(workers, cpus=cpus).cpus_per_node(nodes) == per_node


def test_auto_counts_the_worker_it_starts_with_and_a_partition_of_its_own_counts_none() -> None:
    assert DataService(1, cpus=2, auto=True).cpus_per_node(2) == 2
    assert DataService(4, "cpu", 2).cpus_per_node(1) == 0


@pytest.mark.parametrize("request_, mincpus", [
    (JobSpec(nodes=1, data_service=DataService(2)), 3),  # 1 rank + 2 workers of 1 CPU
    (JobSpec(nodes=2, data_service=DataService(2)), 2),  # 1 rank + 1 worker on each node
    (JobSpec(nodes=2, cpu_tasks_per_node=2, data_service=DataService(3, cpus=2)), 6),  # 2 ranks + 2 x 2
    (JobSpec(nodes=2, gpus_per_node=4, data_service=DataService(2, cpus=4)), 8),  # 4 ranks (one a GPU) + 4
    (JobSpec(nodes=1, data_service=DataService(1, cpus=2, auto=True)), 3),
])
def test_a_service_beside_the_ranks_adds_its_cpus_to_each_nodes_mincpus(request_: JobRequest, mincpus: int) -> None:
    assert directives(request_)["mincpus"] == mincpus
    assert f"#SBATCH --mincpus={mincpus}" in directive_lines(request_)


@pytest.mark.parametrize("request_", [
    JobSpec(nodes=2, cpus_per_task=4, data_service=DataService(2, cpus=2)),  # 1 rank of 4: Slurm gives a node 4
    JobSpec(nodes=4, min_nodes=2, cpu_tasks_per_node=2, cpus_per_task=2, data_service=DataService(3)),
])
def test_with_cpus_per_task_over_1_the_service_asks_no_mincpus_which_slurm_would_not_give(request_: JobRequest) -> None:
    # Slurm 22.05 holds --ntasks-per-node x --cpus-per-task a node whatever --mincpus says; one beyond a node's CPUs
    # would only have the job refused. The workers share the ranks' CPUs (the body's check says when they cannot).
    alone = replace(request_, data_service=None)
    assert directives(request_).get("mincpus") == directives(alone).get("mincpus")


def test_without_a_service_beside_the_ranks_nothing_changes() -> None:
    assert "mincpus" not in directives(JobSpec(nodes=2, cpu_tasks_per_node=2))
    assert directives(JobSpec(nodes=4, min_nodes=2, cpu_tasks_per_node=2))["mincpus"] == 2  # (a range's own)
    served = JobSpec(nodes=2, data_service=DataService(2, "cpu", 4))
    assert "mincpus" not in directives(served)  # (its own component holds its CPUs)
    assert "#SBATCH --cpus-per-task=4" in directive_lines(served)


def test_a_parameter_server_job_counts_them_on_its_first_component_where_srun_puts_the_service() -> None:
    request = JobRequest.parameter_servers(Group(2, 2), "cpu", ps_nodes=1, num_ps=1, data_service=DataService(2))
    chief_and_ps, workers = request.groups
    assert service_cpus(request, chief_and_ps) == 2 and service_cpus(request, workers) == 0
    assert directives(request, chief_and_ps)["mincpus"] == 4  # chief + ps + 2 workers on the one node
    assert "mincpus" not in directives(request, workers)


def test_a_users_own_mincpus_wins() -> None:
    assert directives(JobSpec(nodes=1, data_service=DataService(2), sbatch=(("mincpus", "16"),)))["mincpus"] == "16"
