"""Parameter servers on CPU nodes: the two-group request, its script, its refusals, its step and its record.
(On a real local cluster with a cpu and a gpu partition: tests/e2e/test_heterogeneous.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.config import TrainConfig
from hpc_train.injob.body import JobBody, srun_arguments, start_line
from hpc_train.login.preflight import limit_problems
from hpc_train.login.partitions import parse_partitions
from hpc_train.spec.request import Group, JobRequest, JobSpecError
from hpc_train.login.script import render_script
from hpc_train.runs.folders import JobRecord, rank_log
from tests.cli.running import run_main

WORKERS = Group(nodes=2, gpus_per_node=2, partition="gpu")
HET = ["--strategy", "parameter_server", "--nodes", "2", "--gpus-per-node", "2", "--partition", "gpu",
       "--ps-partition", "cpu"]


def test_the_chief_and_ps_are_one_group_on_the_cpu_partition_and_the_workers_another() -> None:
    request = JobRequest.parameter_servers(WORKERS, "cpu", ps_nodes=2, num_ps=2)
    servers, workers = request.groups
    assert (servers.partition, servers.nodes, servers.num_tasks, servers.gpus_per_node) == ("cpu", 2, 3, 0)
    assert servers.roles == ("chief", "ps") and workers.roles == ("worker",)
    assert (workers.partition, workers.num_tasks) == ("gpu", 4) and request.num_tasks == 7 and request.heterogeneous


def test_the_script_is_one_heterogeneous_job_with_the_job_wide_options_in_the_first_block() -> None:
    script = render_script(JobRequest.parameter_servers(WORKERS, "cpu", num_ps=2, name="ps het"), TrainConfig(),
                           "/opt/hpc")
    directives = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    hetjob = directives.index("#SBATCH hetjob")
    first, second = directives[:hetjob], directives[hetjob + 1:]
    assert {"#SBATCH --partition=cpu", "#SBATCH --nodes=1", "#SBATCH --ntasks=3", "#SBATCH --requeue",
            "#SBATCH --job-name='ps het'"} <= set(first)
    assert not any("gpus" in line for line in first)
    assert set(second) == {"#SBATCH --partition=gpu", "#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=2",
                           "#SBATCH --gpus-per-node=2"}
    assert "--strategy parameter_server" in script


@pytest.mark.parametrize("extra, said", [
    (["--strategy", "multiworker"], "--ps-partition applies to --strategy parameter_server"),
    (["--ps-nodes", "3"], "--ps-nodes 3: the chief and 1 ps are 2 tasks"),
    (["--ps-nodes", "0"], "--ps-nodes 0: must be a whole number of 1 or more"),
    (["--sweep", "seed=1,2"], "Slurm has no job arrays of heterogeneous jobs"),
    (["--ps-partition", "bad\nname"], "--ps-partition 'bad\\nname': empty, or holds a line break"),
])
def test_a_request_that_cannot_be_a_heterogeneous_job_is_one_line(extra: list[str], said: str, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["render", *HET, *extra, "-o", str(tmp_path / "job.sbatch")], capsys)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "job.sbatch").exists()


def test_ps_nodes_without_ps_partition_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["render", "--nodes", "1", "--ps-nodes", "2"], capsys)
    assert code == 2 and "--ps-nodes applies with --ps-partition" in err


def test_ps_nodes_beyond_the_cpu_partition_names_the_ps_option() -> None:
    partitions = ("PartitionName=cpu Default=YES MaxNodes=UNLIMITED MaxTime=UNLIMITED Nodes=c[1-2] TotalNodes=2\n")
    [cpu] = parse_partitions(partitions, "NodeName=c1 Gres=(null)\nNodeName=c2 Gres=(null)\n")
    request = JobRequest.parameter_servers(WORKERS, "cpu", ps_nodes=3, num_ps=3)
    [problem] = limit_problems(request, cpu, request.groups[0])
    assert problem.startswith("--ps-nodes 3: partition cpu has 2 node(s) in all")


def test_a_two_group_request_of_multiworker_is_refused() -> None:
    servers = Group(1, partition="cpu", roles=("chief", "ps"), ntasks=2)
    with pytest.raises(JobSpecError, match="--ps-partition applies to --strategy parameter_server"):
        JobRequest((servers, WORKERS))


def test_the_step_spans_every_component_and_each_rank_logs_by_its_procid() -> None:
    body = JobBody(Path("runs/x-9"), "parameter_server", output="/r/logs/rank-%t.out")
    arguments = srun_arguments(body, ["hpc-train", "train"], components=2)
    assert arguments[:2] == ["--het-group=0,1", "--kill-on-bad-exit=0"]
    assert not any(argument.startswith("--output") for argument in arguments)  # Slurm's %t is off there
    assert arguments[2:4] == ["bash", "-c"] and arguments[-4:] == ["/r/logs/rank-%t.out", "", "hpc-train", "train"]
    assert srun_arguments(body, ["x"])[:3] == ["--kill-on-bad-exit=0", "--open-mode=append",
                                                "--output=/r/logs/rank-%t.out"]  # a plain job: as before


def test_a_rank_of_a_heterogeneous_step_writes_its_own_log(tmp_path: Path) -> None:
    import os
    import subprocess

    body = JobBody(tmp_path, output=str(tmp_path / "rank-%t.out"))
    wrapped = srun_arguments(body, ["sh", "-c", "echo out; echo err >&2"], components=2)[2:]
    subprocess.run(wrapped, env={**os.environ, "SLURM_PROCID": "4"}, check=True)
    assert (tmp_path / "rank-4.out").read_text() == "out\nerr\n"


def test_the_start_line_names_every_components_nodes_and_tasks() -> None:
    env = {"SLURM_JOB_ID": "9", "SLURM_JOB_NODELIST": "c1", "SLURM_NTASKS": "3", "SLURM_HET_SIZE": "2",
           "SLURM_JOB_NODELIST_HET_GROUP_0": "c1", "SLURM_JOB_NODELIST_HET_GROUP_1": "g[1-2]",
           "SLURM_NTASKS_HET_GROUP_0": "3", "SLURM_NTASKS_HET_GROUP_1": "4"}
    assert start_line(JobBody(Path("runs/x-9")), env) == (
        "hpc-train: job 9 on c1 + g[1-2], 3+4 tasks; logs and results in runs/x-9")


def test_a_heterogeneous_jobs_rank_logs_are_the_rendered_scripts() -> None:
    record = JobRecord("9", "x", "runs/x-9", 3, 6, "parameter_server", 0.0, components=[{"partition": "cpu"}])
    assert rank_log(record, 5) == Path("runs/x-9/logs/rank-5.out")


def test_sacct_rows_of_a_heterogeneous_job_are_its_leaders() -> None:
    from hpc_train.slurm.follow import parse_sacct_jobs

    rows = "15+0|COMPLETED|0:0|00:00:38|node1\n15+1|FAILED|1:0|00:00:38|node[3-4]\n16|RUNNING|0:0|00:00:02|n2\n"
    jobs = parse_sacct_jobs(rows)
    assert set(jobs) == {"15", "16"} and (jobs["15"].state, jobs["15"].nodes) == ("COMPLETED", "node1")


def test_status_shows_each_component() -> None:
    from hpc_train.login.submission import components
    from hpc_train.runs.views import component_lines

    request = JobRequest.parameter_servers(WORKERS, "cpu", num_ps=2)
    record = JobRecord("9", "x", "runs/x-9", 3, 7, "parameter_server", 0.0, components=components(request))
    assert component_lines(record) == [
        "  part 0:  cpu, 1 node(s), 3 task(s) (chief, ps), no GPU(s) per node",
        "  part 1:  gpu, 2 node(s), 4 task(s) (worker), 2 GPU(s) per node"]


def test_a_node_to_blame_is_excluded_in_the_component_that_ran_on_it() -> None:
    from hpc_train.injob.retry import expand_nodes
    from hpc_train.injob.retry import component_exclusions

    parts = [{"JobId": "15", "NodeList": "c1", "ExcNodeList": "(null)"},
             {"JobId": "16", "NodeList": "g[1-2]", "ExcNodeList": "g9"}]
    assert component_exclusions(("g1", "g9"), parts, expand_nodes) == [("15", ()), ("16", ("g1", "g9"))]
    assert component_exclusions(("c1",), parts, expand_nodes) == [("15", ("c1",)), ("16", ())]


def test_a_held_heterogeneous_job_is_submitted_held() -> None:
    held = JobRequest.parameter_servers(WORKERS, "cpu", hold=True)
    script = render_script(held, TrainConfig(), "/opt/hpc").splitlines()
    assert script.index("#SBATCH --hold") < script.index("#SBATCH hetjob")
    assert "#SBATCH --hold" not in render_script(JobRequest.parameter_servers(WORKERS, "cpu"), TrainConfig(), "/x")


def test_the_yaml_job_section_asks_for_the_same_heterogeneous_job_and_a_flag_wins(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "job.yaml"
    config.write_text("epochs: 2\njob:\n  ps_partition: cpu\n  ps_nodes: 1\n")
    flags = ["--strategy", "parameter_server", "--nodes", "2", "--gpus-per-node", "2", "--partition", "gpu"]
    code, _, err = run_main(["render", *flags, "--config", str(config), "-o", str(tmp_path / "yaml.sbatch")], capsys)
    assert code == 0, err
    code, _, err = run_main(["render", *HET, "-o", str(tmp_path / "flags.sbatch")], capsys)
    assert code == 0, err
    directives = [[line for line in (tmp_path / name).read_text().splitlines() if line.startswith("#SBATCH")]
                  for name in ("yaml.sbatch", "flags.sbatch")]
    assert directives[0] == directives[1] and "#SBATCH --partition=cpu" in directives[0]
    code, _, err = run_main(["render", *flags, "--config", str(config), "--ps-partition", "small",
                             "-o", str(tmp_path / "wins.sbatch")], capsys)
    assert code == 0 and "#SBATCH --partition=small" in (tmp_path / "wins.sbatch").read_text()


@pytest.mark.parametrize("section, said", [
    ("job:\n  ps_nodes: 0\n", "job: ps_nodes 0: a whole number of 1 or more"),
    ("job:\n  partitions: cpu\n", "job: 'partitions' is not a job option; known: ps_partition, ps_nodes"),
    ("job: cpu\n", "'job:' must be a mapping of ps_partition, ps_nodes"),
])
def test_a_bad_job_section_is_one_line(section: str, said: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "job.yaml"
    config.write_text(section)
    code, _, err = run_main(["render", *HET[:-2], "--config", str(config), "-o", str(tmp_path / "x")], capsys)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1


def test_train_refuses_a_job_section_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "job.yaml"
    config.write_text("epochs: 1\njob:\n  ps_partition: cpu\n")
    code, _, err = run_main(["train", "--config", str(config)], capsys)
    assert code == 2 and "its 'job:' section holds render's and submit's options" in err


def test_the_yamls_strategy_and_num_ps_make_the_job_unless_a_flag_says_otherwise(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """They were read for training but not for the job, which stayed multiworker without a word."""
    config = tmp_path / "ps.yaml"
    config.write_text("strategy: parameter_server\nnum_ps: 2\n")
    code, _, err = run_main(["render", "--nodes", "2", "--ntasks-per-node", "2", "--config", str(config),
                             "-o", str(tmp_path / "ps.sbatch")], capsys)
    script = (tmp_path / "ps.sbatch").read_text()
    assert code == 0 and "--strategy parameter_server" in script and "num_ps: 2\n" in script, err
    code, _, err = run_main(["render", "--nodes", "2", "--strategy", "multiworker", "--config", str(config),
                             "-o", str(tmp_path / "mw.sbatch")], capsys)
    assert code == 0 and "--strategy multiworker" in (tmp_path / "mw.sbatch").read_text(), err


def test_submit_runs_a_heterogeneous_job_with_its_own_python_as_a_plain_submit_does(tmp_path: Path) -> None:
    """Not the `hpc-train` some PATH has: `python -m hpc_train submit` works without the console script."""
    import shlex
    import subprocess
    import sys

    from tests.fake_slurm import FakeSlurm, without_slurm

    fake = FakeSlurm(tmp_path / "fake", {
        "sbatch": "77\n", "sinfo": "",  # (--parsable)
        "scontrol show partition": "PartitionName=gpu Default=YES Nodes=g[1-2] TotalNodes=2 MaxNodes=UNLIMITED\n"
                                   "PartitionName=cpu Default=NO Nodes=c[1-3] TotalNodes=3 MaxNodes=UNLIMITED\n",
        "scontrol show node": "NodeName=g1 Gres=gpu:2\nNodeName=g2 Gres=gpu:2\nNodeName=c1 Gres=(null)\n"
                              "NodeName=c2 Gres=(null)\nNodeName=c3 Gres=(null)\n"})
    env = {**without_slurm(), "PATH": fake.install(tmp_path / "bin", ["sbatch"])["PATH"]}
    result = subprocess.run([sys.executable, "-m", "hpc_train", "submit", *HET], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout == "77\n", result.stderr
    [script] = fake.scripts()
    # The plan's script, render's (login/plan.py): it activates the environment `python -m hpc_train` runs from
    # (here, the checkout's env/activate.sh), whose hpc-train runs the body.
    from hpc_train.cli.joboptions import default_home

    assert "exec hpc-train job " in script and "#SBATCH hetjob" in script
    assert f"export HPC_TRAIN_HOME={shlex.quote(default_home())}\n" in script
