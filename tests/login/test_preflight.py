"""Never submit what cannot run: the partition's limits against the request (pure), and on a real Slurm."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.slurm.pending import reason_in_words
from hpc_train.login.partitions import Partition, node_gpus, parse_partitions
from hpc_train.login.preflight import limit_problems
from hpc_train.spec.request import JobSpec, JobSpecError
from tests.fake_slurm import FakeSlurm, Reply

PARTITIONS = (
    "PartitionName=debug AllowGroups=ALL Default=YES MaxNodes=UNLIMITED MaxTime=UNLIMITED Nodes=node[1-4] "
    "State=UP TotalCPUs=16 TotalNodes=4\n"
    "PartitionName=gpu Default=NO MaxNodes=2 MaxTime=1-00:00:00 Nodes=gpu[9-10] TotalNodes=2\n"
)
NODES = ("NodeName=node1 Arch=x86_64 Gres=(null) State=IDLE\n"
         "NodeName=gpu9 Gres=gpu:a100:4(S:0-1),mps:400 State=IDLE\n"
         "NodeName=gpu10 Gres=gpu:2 State=MIXED\n")


def test_partitions_and_their_gpus_are_read_from_scontrol() -> None:
    assert node_gpus(NODES) == {"node1": 0, "gpu9": 4, "gpu10": 2}
    debug, gpu = parse_partitions(PARTITIONS, NODES)
    assert debug == Partition("debug", 4, None, None, (0, 0, 0, 0), default=True)
    assert gpu == Partition("gpu", 2, 2, 24 * 60, (4, 2), default=False)


@pytest.mark.parametrize("spec, expected", [
    (JobSpec(nodes=100000), "--nodes 100000: partition gpu has 2 node(s) in all; ask for at most 2, or submit"),
    (JobSpec(nodes=2, gpus_per_node=4), "--gpus-per-node 4: partition gpu has 1 node(s) with that many GPUs (at "
                                        "most 4 per node), 2 asked for; ask for fewer GPUs or nodes"),
    (JobSpec(nodes=1, time="2-00:00:00"), "--time 2-00:00:00: beyond partition gpu's time limit of 1-00:00:00 "
                                          "(MaxTime); ask for less"),
])
def test_a_request_beyond_the_partition_is_named_with_its_limit(spec: JobSpec, expected: str) -> None:
    [problem] = limit_problems(spec, parse_partitions(PARTITIONS, NODES)[1])
    assert problem.startswith(expected) and "\n" not in problem


def test_a_request_within_the_limits_has_no_problem() -> None:
    gpu = parse_partitions(PARTITIONS, NODES)[1]
    assert limit_problems(JobSpec(nodes=2, gpus_per_node=2, time="23:00:00"), gpu) == []
    debug = parse_partitions(PARTITIONS, NODES)[0]
    assert limit_problems(JobSpec(nodes=4, time="30-00:00:00"), debug) == []


def test_a_data_service_no_node_can_hold_beside_the_ranks_is_refused_naming_its_flags() -> None:
    """Each node's CPUs (CPUTot) against the request's --mincpus: its ranks' CPUs and the workers srun puts there."""
    from hpc_train.spec.data_service import DataService

    nodes = "".join(f"NodeName=node{index} CPUTot=4 Gres=(null)\n" for index in range(1, 5))
    debug = parse_partitions(PARTITIONS, nodes)[0]
    assert debug.node_cpus == (4, 4, 4, 4)
    [problem] = limit_problems(JobSpec(nodes=1, data_service=DataService(4, cpus=2)), debug)
    assert problem == ("--data-workers 4 --data-cpus 2: each node needs 9 CPU(s) for its ranks and the 4 data "
                       "worker(s) placed beside them, and partition debug has 0 node(s) with that many (at most 4 "
                       "CPUs a node); ask for fewer data workers or CPUs each, more nodes (the workers spread over "
                       "them), put them on a partition of their own (--data-partition P), or let them share the "
                       "ranks' CPUs (--sbatch mincpus=1)")
    # Spread over 4 nodes, one each: 1 + 2 CPUs a node fit; so do 3 workers on one node of 4.
    assert limit_problems(JobSpec(nodes=4, data_service=DataService(4, cpus=2)), debug) == []
    assert limit_problems(JobSpec(nodes=1, data_service=DataService(3)), debug) == []
    # The user's own --sbatch mincpus=N replaces the request's: Slurm's --test-only judges it, not this.
    own = JobSpec(nodes=1, data_service=DataService(4, cpus=2), sbatch=(("mincpus", "4"),))
    assert limit_problems(own, debug) == []
    # Nodes that do not say their CPUs: nothing to judge by (sbatch --test-only still asks the scheduler).
    assert parse_partitions(PARTITIONS, NODES)[0].node_cpus == ()


def test_pending_reasons_are_told_in_words() -> None:
    assert reason_in_words("PartitionConfig").startswith("PartitionConfig: the request does not fit the partition")
    assert "never start" in reason_in_words("(PartitionTimeLimit)")
    assert reason_in_words("Resources") == "Resources: waiting for nodes to come free"
    assert reason_in_words("QOSGrpGRES").startswith("QOSGrpGRES: a limit of your QOS or account")
    assert reason_in_words("SomethingNew") == "SomethingNew"


def test_a_held_job_is_told_how_to_release_it_by_its_own_id() -> None:
    """(issue 27, 11) status pasted a literal "scontrol release JOBID"."""
    assert reason_in_words("JobHeldUser", "4242").endswith("it starts after scontrol release 4242")
    assert "scontrol release 4242" in reason_in_words("launch failed requeued held", "4242")


def listed(tmp_path: Path, sbatch: str | Reply = "sbatch: Job 1 to start at now\n") -> tuple[FakeSlurm, dict]:
    """Slurm's commands on PATH: partitions debug (4 nodes, any time) and gpu (2 nodes, a day at most)."""
    fake = FakeSlurm(tmp_path / "fake", {"scontrol show partition": PARTITIONS, "scontrol show node": NODES,
                                         "sbatch": sbatch})
    return fake, fake.install(tmp_path / "bin")


def test_a_partition_list_is_checked_partition_by_partition_and_passed_to_slurm_whole(tmp_path: Path) -> None:
    """(issue 37, 3) `--partition gpu,debug`: gpu can never hold 4 nodes, debug can: Slurm starts it there."""
    from hpc_train.login.preflight import check_request

    fake, env = listed(tmp_path)
    check_request(JobSpec(nodes=4, partition="gpu,debug", name=tmp_path.name), env)
    [asked] = fake.calls("sbatch")
    assert "--partition=gpu,debug" in asked.args and asked.args[0] == "--test-only"


def test_a_partition_list_none_of_which_can_run_it_is_refused_by_the_first(tmp_path: Path) -> None:
    from hpc_train.login.preflight import check_request

    fake, env = listed(tmp_path)
    with pytest.raises(JobSpecError, match=r"^--nodes 5: partition gpu has 2 node\(s\) in all"):
        check_request(JobSpec(nodes=5, partition="gpu,debug", name=tmp_path.name), env)
    assert not fake.calls("sbatch")


@pytest.mark.parametrize("partition, expected", [
    ("gpu,nosuch", "--partition nosuch (of gpu,nosuch): no such partition here; choose among debug, gpu"),
    ("nosuch", "--partition nosuch: no such partition here; choose one of debug, gpu"),
])
def test_an_unknown_partition_of_a_list_is_named(partition: str, expected: str, tmp_path: Path) -> None:
    from hpc_train.login.preflight import check_request

    fake, env = listed(tmp_path)
    with pytest.raises(JobSpecError) as raised:
        check_request(JobSpec(nodes=1, partition=partition, name=tmp_path.name), env)
    assert str(raised.value) == expected
    assert not fake.calls("sbatch")


@pytest.mark.parametrize("partition", ["gpu,", "gpu, debug", ",gpu", "gpu,,debug"])
def test_a_malformed_partition_list_is_refused_in_one_line(partition: str) -> None:
    with pytest.raises(JobSpecError, match=r"^--partition .*: a partition's name, or several separated by commas "
                                           r"without spaces \(e\.g\. gpu,debug"):
        JobSpec(nodes=1, partition=partition)


def test_a_group_names_its_partitions() -> None:
    assert JobSpec(nodes=1, partition="gpu,debug").groups[0].partitions == ("gpu", "debug")
    assert JobSpec(nodes=1).groups[0].partitions == ()
