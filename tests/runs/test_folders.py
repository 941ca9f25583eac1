"""Job folders and their names: a job's, a sweep's and each of its elements', made in one place."""

from __future__ import annotations

import json
from pathlib import Path

from hpc_train.runs.folders import (JobRecord, all_records, element_folder, element_folders, element_id,
                                    element_records, find_record, folders_of, rank_log, run_folder)


def sweep_record(runs: Path) -> JobRecord:
    return JobRecord("4242", "sw", str(run_folder(runs, "sw", "4242")), 1, 2, "multiworker", 10.0, None,
                     sweep="4242", elements=[{"seed": 1}, {"seed": 2}])


def test_a_jobs_folder_is_name_dash_id_and_an_elements_id_is_the_arrays_underscore_index() -> None:
    assert run_folder(Path("runs"), "mnist", "17") == Path("runs/mnist-17")
    assert element_id("4242", 3) == "4242_3" and element_id("4242", "INDEX") == "4242_INDEX"
    record = sweep_record(Path("runs"))
    assert element_folder(record, 1) == Path("runs/sw-4242_1") == run_folder(Path("runs"), "sw", element_id("4242", 1))
    assert element_folders(record) == [Path("runs/sw-4242_0"), Path("runs/sw-4242_1")]


def test_each_element_is_a_job_like_the_sweeps_with_its_own_id_and_folder(tmp_path: Path) -> None:
    record = sweep_record(tmp_path)
    elements = element_records(record)
    assert [(element.job_id, element.folder) for element in elements] == [
        ("4242_0", str(tmp_path / "sw-4242_0")), ("4242_1", str(tmp_path / "sw-4242_1"))]
    assert all(element.is_element and not element.is_sweep and element.elements is None for element in elements)
    assert {(element.name, element.tasks, element.submitted, element.sweep) for element in elements} == {
        ("sw", 2, 10.0, "4242")}
    for written in (record, *elements):
        written.write()
    assert [found.job_id for found in all_records(tmp_path)] and find_record("4242_1", tmp_path) == elements[1]
    assert json.loads((tmp_path / "sw-4242_0" / "job.json").read_text())["sweep"] == "4242"
    assert rank_log(elements[0], 1) == tmp_path / "sw-4242_0" / "logs" / "rank-1.out"


def test_a_jobs_folders_are_found_by_its_id_whatever_its_name(tmp_path: Path) -> None:
    (tmp_path / "mnist-17").mkdir()
    (tmp_path / "mnist-170").mkdir()
    assert folders_of("17", tmp_path) == [tmp_path / "mnist-17"]
    assert folders_of("18", tmp_path) == []


def test_a_heterogeneous_job_started_with_sbatch_records_every_component() -> None:
    """The batch shell's SLURM_NTASKS and SLURM_JOB_NUM_NODES are component 0's alone."""
    from hpc_train.runs.folders import started_record

    env = {"SLURM_JOB_ID": "42", "SLURM_JOB_NAME": "het", "SLURM_HET_SIZE": "2", "SLURM_NTASKS": "3",
           "SLURM_JOB_NUM_NODES": "1", "SLURM_JOB_NODELIST_HET_GROUP_0": "cpu1", "SLURM_NTASKS_HET_GROUP_0": "3",
           "SLURM_JOB_PARTITION_HET_GROUP_0": "cpu", "SLURM_JOB_NODELIST_HET_GROUP_1": "gpu[1-2]",
           "SLURM_NTASKS_HET_GROUP_1": "4", "SLURM_JOB_PARTITION_HET_GROUP_1": "gpu",
           "SLURM_GPUS_PER_NODE_HET_GROUP_1": "a100:2"}
    record = started_record(Path("runs/het-42"), env, "parameter_server", 1, 3, None, 0.0)
    assert (record.nodes, record.tasks) == (3, 7)
    assert record.components == [
        {"partition": "cpu", "nodes": 1, "tasks": 3, "gpus_per_node": None, "roles": ["chief", "ps"]},
        {"partition": "gpu", "nodes": 2, "tasks": 4, "gpus_per_node": 2, "roles": ["worker"]}]
    plain = started_record(Path("runs/one-7"), {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "2"}, "multiworker", 2, 2,
                           None, 0.0)
    assert plain.components is None and plain.tasks == 2
