"""--after, --dependency and --sbatch OPTION=VALUE: checked (pure), in the request, in every group's #SBATCH block,
in submitit's parameters, and in preflight's `sbatch --test-only`."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.spec.request import Group, JobRequest, JobSpec, JobSpecError
from hpc_train.spec.sbatchoptions import (after_dependency, after_problem, combined_problem, dependency_problem,
                                           parse)
from hpc_train.spec.directives import directive_lines
from tests.fake_slurm import FakeSlurm, Reply

PARTITION = {"scontrol show node": "", "scontrol show partition": "PartitionName=debug Default=YES TotalNodes=4\n"}
EXTRA = (("reservation", "maint"), ("exclude", "node3"), ("mail-user", "a@b.c"), ("contiguous", None))


@pytest.mark.parametrize("text, parsed", [
    ("reservation=maint", ("reservation", "maint")), ("--exclude=node[1-2]", ("exclude", "node[1-2]")),
    ("contiguous", ("contiguous", None)), ("comment=a=b", ("comment", "a=b")), ("comment=", ("comment", "")),
])
def test_an_sbatch_option_is_its_long_name_and_its_value(text: str, parsed: tuple[str, str | None]) -> None:
    assert parse(text) == parsed


@pytest.mark.parametrize("options, said", [
    ((("time", "1:00:00"),), "--sbatch time=1:00:00: hpc-train sets it; use --time"),
    ((("job-name", "x"),), "--sbatch job-name=x: hpc-train sets it; use --name"),
    ((("gres", "gpu:2"),), "use --gres"),
    ((("array", "0-3"),), "use --sweep"),
    ((("dependency", "afterok:1"),), "use --dependency SPEC, or --after JOBID"),
    ((("output", "x.out"),), "hpc-train names the logs itself"),
    ((("requeue", None),), "hpc-train requeues the job itself"),
    ((("wait", None),), "submit returns at once"),
    ((("hetjob", None),), "use --ps-partition"),
    ((("reservaton", "maint"),), "--sbatch reservaton=maint: not an sbatch option; did you mean reservation?"),
    ((("x", "node3"),), "--sbatch x=node3: give sbatch's long option name"),
    ((("reservation", None),), "--sbatch reservation: takes a value: --sbatch reservation=VALUE"),
    ((("contiguous", "yes"),), "--sbatch contiguous=yes: takes no value: --sbatch contiguous"),
    ((("comment", ""),), "--sbatch comment=: empty, or holds a line break"),
    ((("comment", "a\n#SBATCH --time=9"),), "empty, or holds a line break or control character"),
    ((("exclude", "node1"), ("exclude", "node2")), "--sbatch exclude given twice: give it once"),
])
def test_an_sbatch_option_hpc_train_cannot_pass_on_is_one_line_naming_the_fix(options: tuple, said: str) -> None:
    with pytest.raises(JobSpecError) as raised:
        JobSpec(nodes=1, sbatch=options)
    assert said in str(raised.value) and "\n" not in str(raised.value), raised.value


def test_flags_that_may_take_a_value_take_one_or_none() -> None:
    assert JobSpec(nodes=1, sbatch=(("nice", None), ("get-user-env", "60L"), ("mail-type", "END,FAIL"))).sbatch


@pytest.mark.parametrize("after, dependency", [
    ("1234", "afterany:1234"), ("1234_5", "afterany:1234_5"), ("1234, 1240_2", "afterany:1234:1240_2"),
])
def test_after_is_afterany_of_every_job_it_names(after: str, dependency: str) -> None:
    assert after_problem(after) is None and after_dependency(after) == dependency
    assert dependency_problem(dependency) is None


@pytest.mark.parametrize("after", ["", "abc", "12;touch x", "12_", "-1", "12,,13", "afterok:12"])
def test_after_that_is_no_job_id_is_one_line(after: str) -> None:
    assert after_problem(after).startswith(f"--after {after!r}: expected a job id (1234)")


@pytest.mark.parametrize("spec, valid", [
    ("afterok:12", True), ("afterok:12:13_4,afternotok:14", True), ("after:12+5:13", True), ("singleton", True),
    ("afterany:12?afterok:13", True), ("afterok:12,afterany:13?afterok:14", False), ("afterok", False),
    ("afterok:x", False), ("whenever:12", False), ("afterok:12+5", False), ("", False),
    ("afterok:12\n#SBATCH --time=1", False),
])
def test_a_dependency_is_slurms_syntax(spec: str, valid: bool) -> None:
    assert (dependency_problem(spec) is None) is valid
    if not valid:
        with pytest.raises(JobSpecError, match="expected Slurm's TYPE:JOBID"):
            JobSpec(nodes=1, dependency=spec)


def test_after_and_dependency_together_are_refused_with_the_one_dependency_that_says_both() -> None:
    assert combined_problem("12", "afterok:13") == ("--after and --dependency: give one (--after 12 is --dependency "
                                                    "afterany:12, both --dependency afterany:12,afterok:13)")
    assert "both" not in combined_problem("12", "afterok:13?afterok:14")
    assert combined_problem("12", None) is None and combined_problem(None, "afterok:1") is None


def test_the_options_are_directives_of_every_group_and_the_dependency_the_first_groups() -> None:
    request = JobRequest.parameter_servers(Group(nodes=2, partition="gpu"), "cpu", dependency="afterany:12",
                                           sbatch=EXTRA)
    lines = directive_lines(request)
    first, second = lines[:lines.index("#SBATCH hetjob")], lines[lines.index("#SBATCH hetjob") + 1:]
    for block in (first, second):
        assert {"#SBATCH --reservation=maint", "#SBATCH --exclude=node3", "#SBATCH --mail-user=a@b.c",
                "#SBATCH --contiguous"} <= set(block)
    assert "#SBATCH --dependency=afterany:12" in first and not any("dependency" in line for line in second)


def test_submitit_gets_them_as_additional_parameters() -> None:
    from hpc_train.config import TrainConfig
    from hpc_train.login.submission import make_executor, sbatch_parameters

    spec = JobSpec(nodes=1, dependency="afterok:12", sbatch=(*EXTRA, ("wckey", "mine")))
    assert sbatch_parameters(spec) == {"reservation": "maint", "exclude": "node3", "mail_user": "a@b.c",
                                       "contiguous": True, "wckey": "mine", "dependency": "afterok:12"}
    assert make_executor(spec, TrainConfig()).parameters["additional_parameters"]["mail_user"] == "a@b.c"


def test_preflight_asks_sbatch_test_only_with_them_and_says_its_refusal_in_one_line(tmp_path: Path) -> None:
    from hpc_train.login.preflight import check_request

    fake = FakeSlurm(tmp_path / "fake", {"sbatch": "sbatch: Job 1 to start at now\n", **PARTITION,
                                         "scontrol show job": "JobId=12 JobState=PENDING\n"})
    env = fake.install(tmp_path / "bin")
    spec = JobSpec(nodes=1, name="chained", dependency="afterany:12", sbatch=EXTRA)
    check_request(spec, env)
    [asked] = fake.calls("sbatch")
    assert asked.args == ["--test-only", "--contiguous", "--dependency=afterany:12", "--exclude=node3",
                          "--mail-user=a@b.c", "--nodes=1", "--ntasks-per-node=1", "--reservation=maint",
                          "--wrap=true"]
    fake.on("sbatch", Reply(stderr="sbatch: error: Job dependency problem\n", code=1))
    with pytest.raises(JobSpecError) as raised:
        check_request(JobSpec(nodes=1, name="chained", dependency="afterany:99"), env)
    assert str(raised.value).startswith("Slurm would not run this request (Job dependency problem): "
                                        "--dependency=afterany:99 ")


@pytest.mark.parametrize("spec, jobs", [("afterany:12", ["12"]), ("after:12+5:13_2,afterok:12?x", ["12", "13_2"]),
                                        ("singleton", [])])
def test_the_jobs_a_dependency_names(spec: str, jobs: list[str]) -> None:
    from hpc_train.spec.sbatchoptions import dependency_jobs

    assert dependency_jobs(spec) == jobs


@pytest.mark.parametrize("sacct", [Reply(stderr="sacct: error: Slurm accounting storage is disabled\n", code=1), ""])
def test_a_job_slurm_knows_nothing_of_is_refused_as_slurm_would_start_at_once(sacct: Reply | str,
                                                                             tmp_path: Path) -> None:
    """Slurm 22.05 takes a dependency on an unknown job as met, afterok too: the job starts at once."""
    from hpc_train.login.preflight import check_request

    fake = FakeSlurm(tmp_path / "fake", {"sbatch": "", "scontrol show job": Reply(stderr="Invalid job id", code=1),
                                         "sacct": sacct, **PARTITION})
    env = fake.install(tmp_path / "bin")
    spec = JobSpec(nodes=1, name=tmp_path.name, dependency="afterok:99")  # (preflight keeps what passed, by request)
    with pytest.raises(JobSpecError, match=r"^--after/--dependency: Slurm knows no job 99 \(neither queued nor in "
                                           r"its accounting\), and would start this one at once; check the id"):
        check_request(spec, env)
    assert not fake.calls("sbatch")
    fake.on("sacct", "99|COMPLETED|0:0|00:00:01|node1\n")  # long gone from the queue, but it ran: fine
    check_request(spec, env)
    assert fake.lines("sbatch")[-1].startswith("sbatch --test-only --dependency=afterok:99")
