"""The data service's own component of a heterogeneous job, as the job body reads it: the job as its ranks'
components make it, and the service's steps on the last component (the variables are what Slurm 22.05's batch
shell held on `hpc-train cluster up`, a cpu and a gpu partition)."""

from __future__ import annotations

from pathlib import Path

from hpc_train.bootstrap.ports import derived_window
from hpc_train.injob.body import job_components, start_line
from hpc_train.injob.dataservice import dispatcher_host, job_nodes, plan_ports, server_steps, step_tasks
from hpc_train.injob.jobline import JobBody
from hpc_train.injob.servicecomponent import COMPONENT, NODES, component_of, ranks_view, service_nodes, srun_environ
from hpc_train.spec.data_service import DataService

# Chief and ps on hcpu1, 4 workers on hgpu[1-2], the data service's dispatcher and worker on hcpu2.
PS_JOB = {"SLURM_JOB_ID": "6917413", "SLURMD_NODENAME": "hcpu1", "SLURM_HET_SIZE": "3",
          "SLURM_JOB_NODELIST": "hcpu1", "SLURM_JOB_NUM_NODES": "1", "SLURM_NTASKS": "2",
          **{f"SLURM_JOB_ID_HET_GROUP_{index}": str(6917413 + index) for index in range(3)},
          "SLURM_JOB_NODELIST_HET_GROUP_0": "hcpu1", "SLURM_JOB_NODELIST_HET_GROUP_1": "hgpu[1-2]",
          "SLURM_JOB_NODELIST_HET_GROUP_2": "hcpu2", "SLURM_JOB_NUM_NODES_HET_GROUP_0": "1",
          "SLURM_JOB_NUM_NODES_HET_GROUP_1": "2", "SLURM_JOB_NUM_NODES_HET_GROUP_2": "1",
          "SLURM_NTASKS_HET_GROUP_0": "2", "SLURM_NTASKS_HET_GROUP_1": "4", "SLURM_NTASKS_HET_GROUP_2": "2",
          "SLURM_PACK_SIZE": "3", "SLURM_JOB_NODELIST_PACK_GROUP_2": "hcpu2"}
# 2 multiworker ranks on hgpu[1-2], the service on hcpu1.
MW_JOB = {"SLURM_JOB_ID": "6917416", "SLURMD_NODENAME": "hgpu1", "SLURM_HET_SIZE": "2",
          "SLURM_JOB_NODELIST": "hgpu[1-2]", "SLURM_JOB_NUM_NODES": "2", "SLURM_NTASKS": "2",
          "SLURM_JOB_NODELIST_HET_GROUP_0": "hgpu[1-2]", "SLURM_JOB_NODELIST_HET_GROUP_1": "hcpu1",
          "SLURM_JOB_NUM_NODES_HET_GROUP_0": "2", "SLURM_JOB_NUM_NODES_HET_GROUP_1": "1",
          "SLURM_NTASKS_HET_GROUP_0": "2", "SLURM_NTASKS_HET_GROUP_1": "2"}
SERVICE = DataService(1, "cpu")


def test_a_parameter_server_job_is_its_two_components_and_the_service_is_kept_aside() -> None:
    view = ranks_view(PS_JOB, SERVICE)
    assert view["SLURM_HET_SIZE"] == "2" and job_components(view) == 2
    assert not [name for name in view if name.endswith(("_HET_GROUP_2", "_PACK_GROUP_2"))]
    assert (view[COMPONENT], view[NODES]) == ("2", "hcpu2") and component_of(view) == 2
    assert service_nodes(view) == ("hcpu2",) and ranks_view(view, SERVICE) == view  # (read once: a retry's env)


def test_a_multiworker_job_with_its_service_apart_is_a_plain_job_to_its_ranks() -> None:
    view = ranks_view(MW_JOB, SERVICE)
    assert "SLURM_HET_SIZE" not in view and job_components(view) == 1
    assert view["SLURM_JOB_NODELIST"] == "hgpu[1-2]" and service_nodes(view) == ("hcpu1",)


def test_srun_is_given_the_jobs_own_component_count_and_the_ranks_still_find_theirs() -> None:
    """A plain srun in a heterogeneous allocation whose environment has no SLURM_HET_SIZE starts nothing (Slurm 22.05:
    "No directives to start application on any available hetjob components"): srun gets the job's count again; the
    bootstrap, reading the same variables in each rank, finds the ranks' components alone (the service's are gone)."""
    from hpc_train.bootstrap.hetstep import component_node_counts

    for job, size in ((MW_JOB, "2"), (PS_JOB, "3")):
        given = srun_environ(ranks_view(job, SERVICE))
        assert given["SLURM_HET_SIZE"] == size
    step = srun_environ(ranks_view(PS_JOB, SERVICE))
    assert component_node_counts(step, ("hcpu1", "hgpu1", "hgpu2")) == (1, 2)
    assert component_node_counts(srun_environ(ranks_view(MW_JOB, SERVICE)), ("hgpu1", "hgpu2")) == ()
    assert srun_environ(MW_JOB) == MW_JOB  # (no component of its own: as it was)


def test_without_a_component_of_its_own_nothing_changes() -> None:
    assert ranks_view(MW_JOB, DataService(1)) == MW_JOB and ranks_view(MW_JOB, None) == MW_JOB
    assert ranks_view({"SLURM_JOB_ID": "7"}, SERVICE) == {"SLURM_JOB_ID": "7"}  # (run without its hetjob block)
    assert component_of(MW_JOB) is None and service_nodes(MW_JOB) == ()


def test_the_service_steps_run_on_its_component_with_ports_of_the_ranks_window(tmp_path: Path) -> None:
    body = JobBody(tmp_path / "run", nodes=2, tasks_per_node=2, gpus_per_node=2, strategy="parameter_server",
                   data_service=SERVICE)
    view = ranks_view(PS_JOB, SERVICE)
    assert step_tasks(body, view) == 6  # the ranks' 2 + 4, not the service's 2
    ports = plan_ports(body, view)
    assert ports.dispatcher == derived_window(6917413, 6, 2, above=2).stop - 1
    assert dispatcher_host(view) == "hcpu2" and job_nodes(view) == ("hcpu2",)
    dispatcher, workers = server_steps(body, view, ports, dispatcher_host(view), "/venv/bin/python")
    assert dispatcher[:2] == ["--het-group=2", "--overlap"] and "--nodelist=hcpu2" in dispatcher
    assert workers[0] == "--het-group=2" and "--nodes=1" in workers and "--ntasks=1" in workers
    assert f"grpc://hcpu2:{ports.dispatcher}" in workers


def test_the_start_line_counts_the_ranks_and_names_the_services_partition(tmp_path: Path) -> None:
    body = JobBody(tmp_path / "run", nodes=2, tasks_per_node=2, gpus_per_node=2, strategy="parameter_server",
                   data_service=SERVICE)
    line = start_line(body, ranks_view(PS_JOB, SERVICE))
    assert line.startswith("hpc-train: job 6917413 on hcpu1 + hgpu[1-2], 2+4 tasks; input through the tf.data "
                           "service: 1 data worker(s) of 1 CPU(s) on partition cpu (example order not exact)"), line
