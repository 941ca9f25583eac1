"""A node range in the request: its #SBATCH lines, the global batch every size shares, and what is refused."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpc_train.login.partitions import Partition
from hpc_train.login.preflight import limit_problems
from hpc_train.spec.request import Group, JobRequest, JobSpec, JobSpecError, fixed_global_batch, global_batch_note
from hpc_train.login.script import job_body
from hpc_train.spec.directives import directive_lines, tasks_per_node
from hpc_train.config import TrainConfig


def test_a_range_asks_slurm_for_min_max_nodes_without_tasks_per_node() -> None:
    # Slurm 22.05 gives --nodes=2-3 --ntasks-per-node=1 only 2 of 3 free nodes: the body sizes the step instead.
    lines = directive_lines(JobSpec(nodes=4, min_nodes=2))
    assert "#SBATCH --nodes=2-4" in lines and not any("ntasks" in line for line in lines), lines
    lines = directive_lines(JobSpec(nodes=4, min_nodes=2, cpu_tasks_per_node=2, cpus_per_task=2))
    assert "#SBATCH --mincpus=4" in lines and not any("ntasks" in line for line in lines), lines
    assert tasks_per_node(Group(4, 2)) == {"ntasks-per-node": 2}  # a fixed size: as before
    assert "#SBATCH --nodes=4" in directive_lines(JobSpec(nodes=4))
    body = job_body(JobSpec(nodes=4, min_nodes=2), TrainConfig(), None)
    assert body.node_range == "2-4" and job_body(JobSpec(nodes=4), TrainConfig(), None).node_range is None


def test_a_heterogeneous_jobs_workers_may_be_a_range_of_one_task_per_node_or_several() -> None:
    spec = JobRequest.parameter_servers(Group(4, 2, one_task_per_node=True, min_nodes=2), "cpu")
    lines = directive_lines(spec)
    assert spec.ranged and lines.index("#SBATCH --nodes=2-4") > lines.index("#SBATCH hetjob"), lines
    assert job_body(spec, TrainConfig(), None).tasks_per_node == 1
    # One task per GPU: the workers' component asks their CPUs, no tasks per node (the body sizes the step), and
    # the body is told the workers' tasks per node, not the chief and ps's.
    spec = JobRequest.parameter_servers(Group(4, 2, min_nodes=2), "cpu", num_ps=2)
    workers = directive_lines(spec)[directive_lines(spec).index("#SBATCH hetjob"):]
    assert "#SBATCH --nodes=2-4" in workers and "#SBATCH --mincpus=2" in workers, workers
    assert not any("ntasks" in line for line in workers), workers
    body = job_body(spec, TrainConfig(), None)
    assert (body.tasks_per_node, body.node_range) == (2, "2-4")
    assert job_body(JobRequest.parameter_servers(Group(4, 2), "cpu"), TrainConfig(), None).tasks_per_node == 1


def test_min_must_be_from_1_to_max() -> None:
    with pytest.raises(JobSpecError, match="MIN must be from 1 to MAX"):
        Group(2, min_nodes=3)
    with pytest.raises(JobSpecError, match="MIN must be from 1 to MAX"):
        Group(2, min_nodes=0)


def test_the_global_batch_is_fixed_at_max_and_every_size_must_divide_it() -> None:
    ranged = JobSpec(nodes=4, min_nodes=2)
    assert fixed_global_batch(ranged, 60, None) == 240  # 60 x 4 replicas: 120 on 2, 80 on 3, 60 on 4
    assert global_batch_note(ranged, 60, None) is None  # nothing rounded: nothing to say
    assert fixed_global_batch(JobSpec(nodes=4), 64, None) is None  # a fixed size: batch_size x replicas, as today
    assert fixed_global_batch(JobSpec(nodes=4, min_nodes=2, gpus_per_node=2), 30, None) == 240  # 8 replicas at MAX
    assert fixed_global_batch(ranged, 64, 120) == 120  # given: kept, when every size divides it
    assert global_batch_note(ranged, 64, 120) is None
    with pytest.raises(JobSpecError) as error:
        fixed_global_batch(ranged, 64, 256)  # given: 3 nodes cannot share it, and the user chose it
    assert str(error.value) == ("--nodes 2-4: a global batch of 256 cannot be shared by the 3 replicas of 3 node(s); "
                                "set global_batch to a multiple of every size's replicas (--set global_batch=N), or "
                                "narrow the range")
    ps = JobSpec(nodes=4, min_nodes=3, strategy="parameter_server")
    assert fixed_global_batch(ps, 64, None) is None  # a ps step is one worker's batch at every size
    assert global_batch_note(ps, 64, None) is None


def test_a_derived_global_batch_is_rounded_up_to_one_every_size_shares_and_said() -> None:
    ranged = JobSpec(nodes=4, min_nodes=2)
    assert fixed_global_batch(ranged, 64, None) == 264  # 256 rounded up to a multiple of 2, 3 and 4 replicas
    assert global_batch_note(ranged, 64, None) == (
        "--nodes 2-4: the global batch is 264, not 64 x 4 replicas, so that every size shares it evenly (per replica: "
        "132 on 2, 88 on 3, 66 on 4 node(s)); --set global_batch=N chooses it")
    gpus = JobSpec(nodes=3, min_nodes=2, gpus_per_node=2)
    assert fixed_global_batch(gpus, 64, None) == 384  # 6 replicas at MAX: 384 = 96 x 4 = 64 x 6, already shared


@given(least=st.integers(1, 6), extra=st.integers(0, 4), gpus=st.integers(0, 4), batch=st.integers(1, 300))
def test_a_derived_global_batch_is_the_smallest_every_size_shares_from_max(least: int, extra: int, gpus: int,
                                                                            batch: int) -> None:
    request = JobSpec(nodes=least + extra, min_nodes=least, gpus_per_node=gpus)
    total = fixed_global_batch(request, batch, None)
    if not request.ranged:
        assert total is None
        return
    replicas = [size * request.group.replicas_per_node for size in range(least, least + extra + 1)]
    assert all(total % count == 0 for count in replicas)
    at_max = batch * replicas[-1]
    assert at_max <= total < at_max + math.lcm(*replicas)


def test_a_range_fits_a_partition_by_its_min() -> None:
    debug = Partition("debug", 4, None, None, (0, 0, 0, 0), default=True)
    assert limit_problems(JobSpec(nodes=8, min_nodes=2), debug) == []  # Slurm gives it what there is
    [problem] = limit_problems(JobSpec(nodes=8, min_nodes=5), debug)
    assert problem.startswith("--nodes 5-8: partition debug has 4 node(s) in all, fewer than its MIN 5; ask for at "
                              "most 4"), problem
    capped = Partition("small", 8, 2, None, (0,) * 8, default=False)
    [problem] = limit_problems(JobSpec(nodes=4, min_nodes=3), capped)
    assert "at most 2 node(s) per job (MaxNodes), fewer than its MIN 3" in problem


def test_submitits_script_asks_for_the_range_without_tasks_per_node() -> None:
    from hpc_train.login.plan import JobPlan
    from hpc_train.login.submission import job_call, make_executor

    executor = make_executor(JobSpec(nodes=4, min_nodes=2, cpu_tasks_per_node=2), TrainConfig())
    script = executor._make_submission_file_text("echo", "uid")  # noqa: SLF001 - submitit's text, as sbatch reads it
    assert "#SBATCH --nodes=2-4\n" in script and "#SBATCH --mincpus=2\n" in script, script
    assert "#SBATCH --ntasks-per-node" not in script
    ranged = JobPlan(JobSpec(nodes=4, min_nodes=2, cpu_tasks_per_node=2), TrainConfig())
    assert job_call(ranged).body.node_range == "2-4"  # (the body sizes each attempt: injob/sizing.py)
    assert executor._num_tasks() == 1  # noqa: SLF001 - the job body, once (use_srun=False): one result, the job's
    fixed = make_executor(JobSpec(nodes=2), TrainConfig())._make_submission_file_text("echo", "uid")  # noqa: SLF001
    assert "#SBATCH --nodes=2\n" in fixed and "#SBATCH --ntasks-per-node=1\n" in fixed


def test_a_parameter_server_range_must_hold_a_chief_a_ps_and_a_worker_at_its_min() -> None:
    with pytest.raises(JobSpecError, match=r"--nodes 2-4: at its MIN the job has 2 task\(s\), but 1 chief \+ 1 ps \+ 1 "
                                           "worker are 3; raise MIN or lower --num-ps"):
        JobSpec(nodes=4, min_nodes=2, strategy="parameter_server")
    assert JobSpec(nodes=4, min_nodes=3, strategy="parameter_server").ranged
