"""The attempt of a node range: its size from Slurm, told to the ranks, the step started on every node it got."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hpc_train.injob.body import JobBody, parse, srun_arguments, start_line
from hpc_train.spec.jobline import script_line
from hpc_train.injob.sizing import attempt_size, rank_environment, step_size_arguments, with_step_tasks
from hpc_train.spec.noderange import NodeRange

SLURM = {"SLURM_JOB_ID": "12", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "node[9-10]"}


def test_the_attempts_size_is_the_nodes_slurm_gave_it() -> None:
    assert attempt_size("2-4", 1, SLURM) == (2, NodeRange(2, 4))
    assert attempt_size(None, 1, SLURM) is None
    # A heterogeneous job: the workers' component (the last one).
    het = {"SLURM_JOB_ID": "9", "SLURM_HET_SIZE": "2", "SLURM_JOB_NUM_NODES_HET_GROUP_1": "3"}
    assert attempt_size("2-4", 1, het) == (3, NodeRange(2, 4))
    assert attempt_size("2-4", 2, {}, cpus=6) == (3, NodeRange(2, 4))  # here: as many as the CPUs hold


def test_the_ranks_are_told_the_range_and_the_size() -> None:
    assert rank_environment((3, NodeRange(2, 4))) == {"HPC_TRAIN_NODE_RANGE": "2-4", "HPC_TRAIN_NODES": "3"}
    assert rank_environment(None) == {}


def test_the_step_runs_on_every_node_the_attempt_got() -> None:
    body = JobBody(Path("runs/x-12"), nodes=4, tasks_per_node=2, node_range="2-4")
    args = srun_arguments(body, ["hpc-train", "train"], 1, sized=attempt_size(body.node_range, 2, SLURM))
    assert args[:3] == ["--nodes=2", "--ntasks=4", "--ntasks-per-node=2"] and args[-2:] == ["hpc-train", "train"]
    assert step_size_arguments(None, 2) == []
    assert srun_arguments(JobBody(Path("x"), nodes=2), ["t"])[0] == "--label"  # a fixed size: as before


def test_a_heterogeneous_step_sizes_its_range_of_workers_with_several_tasks_per_node() -> None:
    # Each component of the step its own srun options, `:` between them; the workers' (the last) on every node the
    # attempt got, 2 tasks each (their allocation counts one a node: it asked none).
    het = {"SLURM_JOB_ID": "9", "SLURM_HET_SIZE": "2", "SLURM_JOB_NUM_NODES_HET_GROUP_1": "3"}
    body = JobBody(Path("runs/x-9"), "parameter_server", nodes=4, tasks_per_node=2, node_range="2-4")
    sized = attempt_size(body.node_range, body.tasks_per_node, het)
    args = srun_arguments(body, ["hpc-train", "train"], 2, ["--task-epilog=E"], sized)
    assert args == ["--het-group=0", "--kill-on-bad-exit=0", "--task-epilog=E", "--label", ":",
                    "--het-group=1", "--nodes=3", "--ntasks=6", "--ntasks-per-node=2", "--kill-on-bad-exit=0",
                    "--task-epilog=E", "--label", "hpc-train", "train"]
    logged = srun_arguments(replace(body, output="logs/rank-%t.out"), ["t"], 2, [], sized)
    assert logged[logged.index(":") + 1:logged.index("bash")] == [
        "--het-group=1", "--nodes=3", "--ntasks=6", "--ntasks-per-node=2", "--kill-on-bad-exit=0"]
    # A fixed size: one step over both components, as their allocations hold the tasks.
    assert srun_arguments(replace(body, node_range=None), ["t"], 2)[:3] == ["--het-group=0,1",
                                                                           "--kill-on-bad-exit=0", "--label"]
    # The start line says the step's tasks, not the allocation's one a node.
    shell = {**het, "SLURM_JOB_NODELIST_HET_GROUP_0": "c1", "SLURM_JOB_NODELIST_HET_GROUP_1": "g[1-3]",
             "SLURM_NTASKS_HET_GROUP_0": "2", "SLURM_NTASKS_HET_GROUP_1": "3"}
    assert start_line(body, shell) == ("hpc-train: job 9 on c1 + g[1-3], 2+6 tasks, on 3 of 2-4 nodes; logs and "
                                       "results in runs/x-9")
    assert with_step_tasks(SLURM, attempt_size("2-4", 2, SLURM), 2) is SLURM  # a plain job's are Slurm's own


def test_the_start_line_says_the_size_of_the_attempt() -> None:
    body = JobBody(Path("runs/x-12"), nodes=4, tasks_per_node=1, node_range="2-4")
    assert start_line(body, SLURM) == ("hpc-train: job 12 on node[9-10], 2 tasks, on 2 of 2-4 nodes; logs and results "
                                       "in runs/x-12")


def test_the_range_goes_through_the_scripts_line_to_the_body() -> None:
    body = JobBody(Path("."), nodes=4, node_range="2-4")
    line = script_line("hpc-train", '"$run_dir"', body, "hpc-train train")
    assert "--node-range 2-4" in line
    words = line.split("exec hpc-train job ")[1].split(" \\\n")[0].replace('"$run_dir"', "runs/x").split()
    parsed, _ = parse([*words, "hpc-train", "train"], {}, 0.0)
    assert parsed.node_range == "2-4"
