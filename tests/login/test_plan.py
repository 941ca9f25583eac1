"""login/plan.py: one plan per job, one writer. `render` and `submit --dry-run` print the same script for the same
options, every kind; what submitit is given asks Slurm the plan's resources; the dry run says which way it goes."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.config import TrainConfig
from hpc_train.login.plan import SBATCH, SUBMITIT, JobPlan
from hpc_train.spec.directives import asked, differences
from hpc_train.spec.pack import Pack
from hpc_train.spec.request import JobSpec
from hpc_train.spec.sweep import grid
from tests.cli.running import run_main

KINDS = {
    "single": ["--nodes", "2", "--gpus-per-node", "2", "--time", "1:30:00"],
    "range": ["--nodes", "2-4"],
    "command": ["--nodes", "2", "--signal-seconds", "300", "--", "python", "train.py", "--lr", "a b"],
    "container": ["--nodes", "2", "--container", "image.sif"],
    "sweep": ["--nodes", "1", "--sweep", "seed=1,2", "--max-parallel", "1"],
    "pack": ["--nodes", "2", "--gpus-per-node", "2", "--pack", "--sweep", "seed=1,2,3"],
    "heterogeneous": ["--strategy", "parameter_server", "--nodes", "2", "--partition", "gpu", "--ps-partition",
                      "cpu"],
    "no warning": ["--nodes", "1", "--signal-seconds", "0"],
    "data component": ["--nodes", "2", "--partition", "gpu", "--data-workers", "2", "--data-partition", "cpu"],
    "heterogeneous and data": ["--strategy", "parameter_server", "--nodes", "2", "--partition", "gpu",
                               "--ps-partition", "cpu", "--data-workers", "1", "--data-partition", "cpu",
                               "--data-cpus", "2"],
}


@pytest.mark.parametrize("kind", KINDS)
def test_render_and_a_dry_run_print_the_same_script(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no Slurm here: nothing asked of one
    (tmp_path / "image.sif").touch()
    options, command = KINDS[kind], []
    if "--" in options:
        options, command = options[:options.index("--")], options[options.index("--"):]
    code, rendered, err = run_main(["render", *options, *command], capsys)
    assert code == 0, err
    code, shown, err = run_main(["submit", *options, "--dry-run", "--no-snapshot", *command], capsys)
    assert code == 0, err
    script = shown[shown.index("#!/bin/bash"):]  # (a sweep's elements first, as a table)
    assert script == rendered
    # Before it, a sweep's heading and its table (a row per element); nothing before any other.
    assert shown[:shown.index("#!/bin/bash")].count("\n") == {"sweep": 2 + 2, "pack": 2 + 3}.get(kind, 0)
    way = "submitted through submitit" if kind in ("single", "range", "command", "container") else \
        "submitted as this script through sbatch"
    assert f"hpc-train submit: dry run: {way}" in err
    assert not (tmp_path / "runs").exists()


def test_the_warning_is_usr1_in_every_script() -> None:
    """The job body and the trainer handle USR1 and USR2 alike; a user's command is told USR1 directly only when
    Slurm sends USR1 (injob/supervisor.py): every script asks USR1, submitit's too (not its USR2)."""
    plan = JobPlan(JobSpec(nodes=2, signal_seconds=90), TrainConfig())
    assert plan.resources()["signal"] == "USR1@90"
    from hpc_train.login.submission import executor_for

    submitted = executor_for(plan)._make_submission_file_text("CMD", "uid")  # noqa: SLF001 - as sbatch reads it
    assert "#SBATCH --signal=USR1@90\n" in submitted and "USR2" not in submitted


@pytest.mark.parametrize("spec", [
    JobSpec(nodes=2, gpus_per_node=2, time="1-00:00:00", partition="gpu", account="a b"),
    JobSpec(nodes=4, min_nodes=2, cpu_tasks_per_node=2, cpus_per_task=3, exclusive=True),
    JobSpec(nodes=1, hold=True, dependency="afterok:12", sbatch=(("exclude", "node3"),), mem="8G"),
], ids=["gpus", "range", "held"])
def test_submitit_asks_the_plans_resources_and_runs_the_body_once(spec: JobSpec) -> None:
    from hpc_train.login.submission import executor_for

    plan = JobPlan(spec, TrainConfig())
    assert plan.submitter == SUBMITIT
    executor = executor_for(plan)
    submitted = executor._make_submission_file_text("CMD", "uid")  # noqa: SLF001 - submitit's, as sbatch reads it
    assert differences(plan.resources(), asked(submitted)) == {}
    assert ("#SBATCH --hold\n" in submitted) == spec.hold
    # use_srun=False: submitit's command runs once, in the batch shell; no srun line, no line that never runs.
    assert "srun" not in submitted and submitted.rstrip().endswith("CMD")
    assert submitted.count("#SBATCH --open-mode=append\n") == 1
    # The batch shell becomes the body (exec), so that a signal to it (`--signal=B:...`, `scancel --batch`)
    # reaches the body: bash would die of a USR1 itself.
    assert executor._submitit_command_str.startswith("exec ")  # noqa: SLF001 - submitit's command line


def test_what_submitit_cannot_say_goes_as_the_script() -> None:
    assert JobPlan(JobSpec(nodes=1, signal_seconds=0), TrainConfig()).submitter == SBATCH
    assert JobPlan(JobSpec(nodes=1), TrainConfig()).sbatch_options() == ("--hold",)


def test_the_data_services_component_is_the_jobs_last_in_the_script_the_test_and_the_record() -> None:
    """Described once (spec/directives.py:data_component): the script's last block, sbatch --test-only's last
    component, and the job record's last part (what status shows)."""
    from hpc_train.login.preflight import test_only_options
    from hpc_train.login.submission import components
    from hpc_train.spec.data_service import DataService
    from hpc_train.spec.request import Group, JobRequest

    spec = JobRequest.parameter_servers(Group(2, gpus_per_node=2, partition="gpu"), "cpu",
                                        data_service=DataService(2, "cpu", 3), sbatch=(("exclude", "hcpu9"),))
    plan = JobPlan(spec, TrainConfig())
    assert (spec.components, plan.kind, plan.submitter) == (3, "heterogeneous", SBATCH)
    blocks = plan.script().split("#SBATCH hetjob\n")
    assert len(blocks) == 3 and blocks[2].startswith("#SBATCH --cpus-per-task=3\n#SBATCH --exclude=hcpu9\n"
                                                     "#SBATCH --ntasks=3\n#SBATCH --partition=cpu\n")
    tested = test_only_options(spec)
    assert tested.count(":") == 2 and tested[tested.index(":", tested.index(":") + 1):] == [
        ":", "--cpus-per-task=3", "--exclude=hcpu9", "--ntasks=3", "--partition=cpu"]
    assert [part["roles"] for part in components(spec)] == [["chief", "ps"], ["worker"], ["data service"]]
    assert JobRequest.one_group(2, data_service=DataService(2)).components == 1  # (beside the ranks)
    served = JobRequest.one_group(2, 1, partition="gpu", data_service=DataService(1, "cpu"))
    assert [part["roles"] for part in components(served)] == [["worker"], ["data service"]]


def test_asked_reads_a_scripts_first_group_and_its_time_in_minutes() -> None:
    script = ("#!/bin/bash\n#SBATCH --time=2:00:00\n#SBATCH --requeue\n#SBATCH --account='a b'\n"
              "#SBATCH --output=x\n#SBATCH hetjob\n#SBATCH --nodes=3\n")
    assert asked(script) == {"time": "120", "requeue": "", "account": "a b"}
    assert differences({"nodes": "2"}, {"nodes": "2-4"}) == {"nodes": ("2", "2-4")}


@pytest.mark.parametrize("spec, sweep, log", [
    (JobSpec(nodes=2), None, "%x-%j/slurm-%x-%j.out"),  # submitit's job
    (JobSpec(nodes=2, pack=Pack()), grid({"seed": [1, 2]}), "%x-%j/slurm-%x-%j.out"),
    (JobSpec(nodes=2), grid({"seed": [1, 2]}), "%x-%A_%a/slurm-%x-%A_%a.out"),  # an element's: its own folder
], ids=["submitit", "pack", "sweep"])
def test_a_submitted_jobs_own_log_is_in_its_run_folder_whichever_way_it_goes(spec: JobSpec, sweep: object, log: str,
                                                                            tmp_path: Path) -> None:
    """(issue 46, 5) one place for a job's own log: runs/NAME-JOBID/slurm-NAME-JOBID.out (runs/joblog.py), not
    submitit's JOBID_0_log.out and .err; its stderr in the same file."""
    plan = JobPlan(spec, TrainConfig(), runs=tmp_path / "runs", sweep=sweep)
    assert plan.job_log() == str(tmp_path / "runs" / log)
    if plan.submitter == SUBMITIT:
        from hpc_train.login.submission import executor_for

        submitted = executor_for(plan)._make_submission_file_text("CMD", "uid")  # noqa: SLF001 - as sbatch reads it
        assert f"#SBATCH --output={tmp_path / 'runs' / log}\n" in submitted and "--error" not in submitted
    else:
        assert f"--output={tmp_path / 'runs' / log}" in plan.sbatch_options()
