"""Giving a pack's nodes back to Slurm (release.py): scontrol's resize asked with the nodes kept, the variables of
slurm_job_J_resize.sh carried into the later steps' environment, a refusal said; Slurm is tests/fake_slurm.py's,
on PATH."""

from __future__ import annotations

from pathlib import Path

from hpc_train.injob.pack import release
from tests.fake_slurm import FakeSlurm, Reply, without_slurm

RESIZE_SH = """\
export SLURM_NODELIST="pk1"
export SLURM_JOB_NODELIST="pk1"
export SLURM_NNODES=1
export SLURM_JOB_NUM_NODES=1
export SLURM_JOB_CPUS_PER_NODE="4"
unset SLURM_NPROCS
unset SLURM_NTASKS
unset SLURM_TASKS_PER_NODE
"""


def test_the_resize_script_slurm_writes_is_read_as_variables_set_and_unset() -> None:
    variables = release.resize_variables(RESIZE_SH)
    assert variables["SLURM_JOB_NODELIST"] == "pk1" and variables["SLURM_NNODES"] == "1"
    assert variables["SLURM_NTASKS"] is None and variables["SLURM_TASKS_PER_NODE"] is None
    env = release.resized({"SLURM_JOB_NODELIST": "pk[1-3]", "SLURM_NTASKS": "3", "HOME": "/h"}, variables)
    assert env["SLURM_JOB_NODELIST"] == "pk1" and "SLURM_NTASKS" not in env and env["HOME"] == "/h"


def test_the_batch_host_is_this_node_else_the_first() -> None:
    assert release.batch_host({"SLURMD_NODENAME": "pk2"}, ["pk1", "pk2"]) == "pk2"
    assert release.batch_host({}, ["pk1", "pk2"]) == "pk1"


def _slurm(tmp_path: Path, update: Reply) -> tuple[FakeSlurm, dict[str, str]]:
    fake = FakeSlurm(tmp_path / ".fake", {"scontrol show": Reply("JobId=7 NodeList=pk[1-3]\n"),
                                          "scontrol update": update})
    return fake, {**without_slurm(fake.install(tmp_path / "bin")), "SLURM_JOB_ID": "7",
                  "SLURM_JOB_NODELIST": "pk[1-3]", "SLURM_NTASKS": "3"}


def test_a_release_asks_slurm_for_the_nodes_kept_and_returns_the_shrunk_jobs_variables(tmp_path: Path) -> None:
    fake, env = _slurm(tmp_path, Reply(shell=f"cat > slurm_job_7_resize.sh <<'EOF'\n{RESIZE_SH}EOF\n"))
    problem, after = release.give_back(env, ["pk2", "pk3"], ["pk1", "pk2", "pk3"])
    assert problem is None
    assert fake.lines("scontrol")[-1] == "scontrol update JobId=7 NodeList=pk1"
    assert after["SLURM_JOB_NODELIST"] == "pk1" and "SLURM_NTASKS" not in after
    assert not list(Path.cwd().glob("slurm_job_7_resize.sh"))  # written in a folder of its own, gone after


def test_a_resize_without_its_script_still_says_the_nodes_kept(tmp_path: Path) -> None:
    fake, env = _slurm(tmp_path, Reply())
    problem, after = release.give_back(env, ["pk3"], ["pk1", "pk2", "pk3"])
    assert problem is None and fake.lines("scontrol")[-1] == "scontrol update JobId=7 NodeList=pk[1-2]"
    assert (after["SLURM_JOB_NODELIST"], after["SLURM_JOB_NUM_NODES"]) == ("pk[1-2]", "2")


def test_a_release_slurm_refuses_is_its_complaint_and_the_environment_unchanged(tmp_path: Path) -> None:
    fake, env = _slurm(tmp_path, Reply(stderr="scontrol: error: Invalid node name specified", code=1))
    problem, after = release.give_back(env, ["pk1"], ["pk1", "pk2", "pk3"])
    assert problem == "scontrol: error: Invalid node name specified" and after == env
    assert release.give_back({k: v for k, v in env.items() if k != "SLURM_JOB_ID"}, ["pk2"], ["pk1", "pk2"])[0]

