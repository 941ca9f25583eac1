"""`hpc-train submit`, status, logs, cancel and list against a mock Slurm (sbatch, sacct, squeue,
scontrol, scancel replaced by scripts on PATH), for machines without Slurm."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from hpc_train.spec.request import time_minutes
from hpc_train.spec.directives import asked, differences
from tests.fake_nvidia import install_nvidia_smi
from tests.fake_slurm import FakeSlurm, Reply, without_slurm

ROOT = Path(__file__).resolve().parents[2]


def mock_slurm(folder: Path, *, accounting: bool = False, job_state: str = "RUNNING") -> FakeSlurm:
    """sbatch answers job 4242 (the fake keeps the script); the rest answer as a cluster without accounting."""
    return FakeSlurm(folder, {
        "sbatch": "Submitted batch job 4242\n",
        "sacct": ("4242|COMPLETED|0:0|00:01:02|node[1-2]\n" if accounting else
                  Reply(stderr="sacct: error: Slurm accounting storage is disabled\n", code=1)),
        "scontrol": f"JobId=4242 JobState={job_state} ExitCode=0:0 RunTime=00:00:42 NodeList=node[1-2]\n",
        "squeue": f"4242 {job_state}\n",
        "scancel": "",
    })


def hpc_train(*args: str, cwd: Path, fake: FakeSlurm | None = None) -> subprocess.CompletedProcess[str]:
    path = fake.install(cwd / "bin")["PATH"] if fake else os.environ["PATH"]
    return subprocess.run([sys.executable, "-m", "hpc_train", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**without_slurm(), "PATH": path})


def test_submit_prints_the_job_id_and_fills_the_job_folder(tmp_path: Path) -> None:
    fake = mock_slurm(tmp_path / "fake")
    result = hpc_train("submit", "--nodes", "4", "--gpus-per-node", "2", "--name", "mnist", "--time", "2:00:00",
                       "--set", "epochs=3", cwd=tmp_path, fake=fake)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "4242\n"  # alone: JOB=$(hpc-train submit ...) gets the id (issue 27, 10)
    assert "hpc-train submit: job 4242 (8 tasks on 4 nodes" in result.stderr
    folder = tmp_path / "runs" / "mnist-4242"
    record = json.loads((folder / "job.json").read_text())
    assert (record["job_id"], record["nodes"], record["tasks"], record["strategy"]) == ("4242", 4, 8, "multiworker")
    assert "epochs: 3" in (folder / "config.yaml").read_text()
    [script] = fake.scripts()
    for line in ("#SBATCH --nodes=4", "#SBATCH --ntasks-per-node=2", "#SBATCH --gpus-per-node=2",
                 "#SBATCH --time=120", "#SBATCH --job-name=mnist"):
        assert line in script


def test_dry_run_prints_the_script_and_submits_nothing(tmp_path: Path) -> None:
    fake = mock_slurm(tmp_path / "fake")
    image = tmp_path / "img" / "tf 2.sif"
    image.parent.mkdir()
    image.touch()
    result = hpc_train("submit", "--nodes", "2", "--gpus-per-node", "4", "--one-task-per-node", "--container",
                       "img/tf 2.sif", "--dry-run", cwd=tmp_path, fake=fake)
    assert result.returncode == 0, result.stderr
    assert "#SBATCH --ntasks-per-node=1" in result.stdout and "#SBATCH --gpus-per-node=4" in result.stdout
    # The job body runs the ranks, each in the image (injob/contained.py): render's script, byte for byte.
    assert "exec hpc-train job " in result.stdout
    assert f" --container {shlex.quote(str(image))} --container-runtime apptainer " in result.stdout
    assert "\n  hpc-train train --config" in result.stdout
    assert "--strategy multiworker" in result.stdout  # a dead task ends the step (tests/injob/test_body.py)
    assert "epochs: 5\n" in result.stdout  # the training settings, as render shows them
    assert result.stdout.count("#SBATCH --open-mode=append\n") == 1
    assert not fake.scripts() and not (tmp_path / "runs").exists()


def test_dry_run_shows_what_submit_submits(tmp_path: Path) -> None:
    fake = mock_slurm(tmp_path / "fake")  # (outside the folder submitted from: what it records is not code)
    here = tmp_path / "here"
    (here / "runs" / "mine").mkdir(parents=True)  # the user's: a dry run leaves it be
    args = ("submit", "--nodes", "2", "--name", "a b", "--set", "epochs=3")
    shown = hpc_train(*args, "--dry-run", cwd=here, fake=fake)
    assert shown.returncode == 0, shown.stderr
    assert sorted(path.name for path in (here / "runs").iterdir()) == ["mine"] and not fake.scripts()
    assert hpc_train(*args, cwd=here, fake=fake).returncode == 0
    # submitit's script (its job runs the body once, login/plan.py) asks what the script shown asks.
    [submitted] = fake.scripts()
    assert differences(asked(shown.stdout), asked(submitted)) == {} and asked(submitted)["nodes"] == "2"


def test_a_dry_run_refuses_what_submit_refuses_with_the_same_line(tmp_path: Path) -> None:
    """(issue 46, 5) `submit --nodes 100000 --dry-run` printed a script and exited 0 where submit refused it: where
    Slurm is, a dry run asks it the same questions (the partition's limits, sbatch --test-only)."""
    partitions = ("PartitionName=debug Default=YES MaxNodes=UNLIMITED MaxTime=UNLIMITED Nodes=node[1-4] "
                  "TotalNodes=4\n")
    fake = FakeSlurm(tmp_path / "fake", {"sbatch": "Submitted batch job 4242\n", "scontrol show partition": partitions,
                                         "scontrol show node": "NodeName=node1 Gres=(null)\n"})
    for args in (("--nodes", "100000"), ("--nodes", "100000", "--sweep", "seed=1,2")):
        refused = [hpc_train("submit", *args, *dry, cwd=tmp_path, fake=fake) for dry in ((), ("--dry-run",))]
        assert [result.returncode for result in refused] == [2, 2], refused[1].stdout
        assert refused[0].stderr == refused[1].stderr and len(refused[1].stderr.strip().splitlines()) == 1
        assert "--nodes 100000: partition debug has 4 node(s) in all" in refused[1].stderr
        assert refused[1].stdout == ""
    fake = FakeSlurm(tmp_path / "fake2", {"sbatch --test-only": Reply(stderr="sbatch: error: Invalid account\n",
                                                                      code=1),
                                          "sbatch": "Submitted batch job 4242\n", "scontrol show partition":
                                          partitions, "scontrol show node": "NodeName=node1 Gres=(null)\n"})
    refused = [hpc_train("submit", "--nodes", "1", *dry, cwd=tmp_path, fake=fake) for dry in ((), ("--dry-run",))]
    assert [result.returncode for result in refused] == [2, 2] and refused[0].stderr == refused[1].stderr
    assert "Slurm would not run this request (Invalid account)" in refused[1].stderr
    assert not fake.scripts()
    silent = FakeSlurm(tmp_path / "fake3", {"sbatch": "Submitted batch job 4242\n", "scontrol": Reply(code=1)})
    shown = hpc_train("submit", "--nodes", "1", "--dry-run", cwd=tmp_path, fake=silent)  # Slurm not answering:
    assert shown.returncode == 0 and "#SBATCH --nodes=1" in shown.stdout  # the script, and a warning that says so
    assert shown.stderr.startswith("hpc-train submit: warning: Slurm's checks not run (Slurm does not answer")


def test_impossible_requests_are_refused_before_submitting(tmp_path: Path) -> None:
    fake = mock_slurm(tmp_path / "fake")
    result = hpc_train("submit", "--nodes", "1", "--strategy", "parameter_server", "--num-ps", "2", cwd=tmp_path,
                       fake=fake)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "--num-ps 2 needs at least 4 tasks" in result.stderr
    assert not fake.scripts()


def test_without_slurm_submit_says_what_to_do(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = subprocess.run([sys.executable, "-m", "hpc_train", "submit", "--nodes", "1"], cwd=tmp_path,
                            capture_output=True, text=True, env={**without_slurm(), "PATH": str(empty)})
    assert result.returncode == 2
    assert "no Slurm here (sbatch not found): add --local" in result.stderr


def test_status_falls_back_to_scontrol_without_accounting_and_says_so(tmp_path: Path) -> None:
    fake = mock_slurm(tmp_path / "fake")
    hpc_train("submit", "--nodes", "2", cwd=tmp_path, fake=fake)
    name = tmp_path.name  # the job is named after the folder it is submitted from (issue 27, 11)
    (tmp_path / "runs" / f"{name}-4242" / "logs").mkdir()
    (tmp_path / "runs" / f"{name}-4242" / "logs" / "rank-0.out").write_text(
        "hpc-train: epoch 1/5  loss 0.5\nnoise\nhpc-train: epoch 2/5  loss 0.3\n")
    result = hpc_train("status", cwd=tmp_path, fake=fake)
    assert result.returncode == 0, result.stderr
    assert f"job 4242 ({name}): running [scontrol/squeue: no Slurm accounting here]" in result.stdout
    assert "nodes:   node[1-2] (2 tasks, multiworker)" in result.stdout
    assert "last:    hpc-train: epoch 2/5  loss 0.3" in result.stdout


def test_where_slurm_is_not_on_path_status_list_and_cancel_answer_in_words(tmp_path: Path) -> None:
    hpc_train("submit", "--nodes", "2", cwd=tmp_path, fake=mock_slurm(tmp_path / "fake"))
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**without_slurm(), "PATH": str(empty)}  # a laptop, or a shell that lost Slurm's module

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hpc_train", *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120, env=env)

    status, listing, cancel = run("status"), run("list"), run("cancel", "4242")
    assert status.returncode == 0 and f"job 4242 ({tmp_path.name}): unknown [" in status.stdout, status.stderr
    assert listing.returncode == 0 and "4242" in listing.stdout and "unknown" in listing.stdout, listing.stderr
    assert cancel.returncode == 2 and cancel.stderr.startswith("hpc-train cancel: error: scancel 4242 failed: ")
    assert len(cancel.stderr.strip().splitlines()) == 1
    assert not any("Traceback" in result.stderr for result in (status, listing, cancel))


def test_status_uses_sacct_where_there_is_accounting(tmp_path: Path) -> None:
    fake = mock_slurm(tmp_path / "fake", accounting=True)
    hpc_train("submit", "--nodes", "2", cwd=tmp_path, fake=fake)
    result = hpc_train("status", "4242", cwd=tmp_path, fake=fake)
    assert "completed, exit 0:0 [sacct]" in result.stdout and "elapsed: 00:01:02" in result.stdout


def test_status_of_a_job_only_sacct_remembers_shows_its_nodes(tmp_path: Path) -> None:
    fake = mock_slurm(tmp_path / "fake", accounting=True)
    hpc_train("submit", "--nodes", "2", cwd=tmp_path, fake=fake)
    fake.on("scontrol", Reply(stderr="slurm_load_jobs error: Invalid job id specified\n", code=1))
    result = hpc_train("status", "4242", cwd=tmp_path, fake=fake)
    assert "completed, exit 0:0 [sacct]" in result.stdout
    assert "nodes:   node[1-2] (2 tasks, multiworker)" in result.stdout  # sacct's NodeList, once scontrol forgot it


def test_logs_list_and_cancel(tmp_path: Path) -> None:
    fake = mock_slurm(tmp_path / "fake", job_state="COMPLETED")
    hpc_train("submit", "--nodes", "2", "--name", "a b", cwd=tmp_path, fake=fake)
    folder = tmp_path / "runs" / "a b-4242"
    (folder / "logs").mkdir()
    (folder / "logs" / "rank-1.out").write_text("rank one says hi\nrank one warns\n")
    assert hpc_train("logs", "4242", "--rank", "1", cwd=tmp_path, fake=fake).stdout == (
        "rank one says hi\nrank one warns\n")
    followed = hpc_train("logs", "4242", "--rank", "1", "--follow", cwd=tmp_path, fake=fake)
    assert followed.returncode == 0 and followed.stdout == "rank one says hi\nrank one warns\n"  # over: it returns
    bad = hpc_train("logs", "4242", "--rank", "2", cwd=tmp_path, fake=fake)
    assert bad.returncode == 2 and "--rank 2: job 4242 has ranks 0-1" in bad.stderr
    listing = hpc_train("list", cwd=tmp_path, fake=fake).stdout.splitlines()
    assert listing[0].split() == ["JOBID", "NAME", "STATE", "SUBMITTED", "FOLDER"]
    assert listing[1].startswith("4242   a b   completed")  # columns as wide as their widest cell
    assert hpc_train("cancel", "4242", cwd=tmp_path, fake=fake).returncode == 0
    assert fake.lines("scancel") == ["scancel 4242"]
    missing = hpc_train("status", "999", cwd=tmp_path, fake=fake)
    assert missing.returncode == 2 and "no job 999 in runs/ here (known: 4242)" in missing.stderr


def test_submitting_never_imports_tensorflow(tmp_path: Path) -> None:
    fake = mock_slurm(tmp_path / "fake")
    probe = ("import sys\nfrom hpc_train.cli import main\nmain(['submit', '--nodes', '2'])\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'tf_keras', 'keras')))\n")
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                            env={**without_slurm(), "PATH": fake.install(tmp_path / "bin")["PATH"]})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("text, minutes", [("90", 90), ("1:30", 2), ("2:00:00", 120), ("1-0", 1440),
                                           ("1-2:30", 1590), ("0:0:1", 1)])
def test_slurm_times_become_submitits_minutes(text: str, minutes: int) -> None:
    assert time_minutes(text) == minutes


@pytest.mark.tensorflow
def test_local_runs_the_same_job_here_without_slurm(tmp_path: Path) -> None:
    from tests.mnist_data import shared_mnist

    result = hpc_train("submit", "--nodes", "2", "--name", "run-here", "--local", "--set", f"data_dir={shared_mnist()}",
                       "--set", "epochs=1", "--set", "train_images=2000", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    [folder] = list((tmp_path / "runs").glob("run-here-local-*"))
    assert json.loads((folder / "metrics.json").read_text())["world_size"] == 2
    record = json.loads((folder / "job.json").read_text())
    assert record["tasks"] == 2 and folder.name == f"run-here-{record['job_id']}"
    assert "1: hpc-train bootstrap: rank 1 is worker 1 at 127.0.0.2:" in result.stderr
    # Run by the job body, as every batch script's job is: its start line first.
    assert result.stderr.startswith(f"hpc-train: job {record['job_id']} on this machine, 2 tasks; logs and results in")
    # Nor TensorFlow's start-up noise, the multi-worker cluster's included (issue 27, 9).
    assert "coordination_service" not in result.stderr and "cuInit" not in result.stderr, result.stderr
    assert "without a job secret" not in result.stderr  # the ranks checked in with the job's (docs/security.md)


@pytest.mark.parametrize("hostile", ["x'; touch PWNED #", "$(touch PWNED)", "`touch PWNED`", 'a "b" c'])
def test_the_submitted_script_keeps_hostile_values_inert_in_a_real_shell(hostile: str, tmp_path: Path) -> None:
    fake = mock_slurm(tmp_path / "fake").on("srun", "")  # the step: its arguments recorded
    image = tmp_path / f"{hostile}.sif"
    image.touch()
    result = hpc_train("submit", "--nodes", "2", "--name", hostile, "--partition", hostile, "--container",
                       str(image), "--sbatch", f"comment={hostile}", cwd=tmp_path, fake=fake)
    assert result.returncode == 0, result.stderr
    [script] = fake.scripts()
    (tmp_path / "submitted.sh").write_text(script)
    run = subprocess.run(["bash", str(tmp_path / "submitted.sh")], cwd=tmp_path, capture_output=True, text=True,
                         env={**without_slurm(), "PATH": fake.install(tmp_path / "bin")["PATH"],
                              "SLURM_JOB_ID": "4242"})
    assert run.returncode == 0, run.stderr
    assert not list(tmp_path.rglob("PWNED"))
    [srun] = fake.calls("srun")
    srun_args = srun.args
    assert f"--output={tmp_path / 'runs' / f'{hostile}-%j' / 'logs' / 'rank-%t.out'}" in srun_args
    assert not any(arg.startswith("--error") for arg in srun_args)  # stdout and stderr together, as render's
    assert srun_args[srun_args.index("--nv"):srun_args.index("env")][-1] == str(image)  # one word, in the image
    assert f"#SBATCH --partition={shlex.quote(hostile)}" in script
    assert f"#SBATCH --comment={shlex.quote(hostile)}" in script


@pytest.mark.parametrize("finished, code, expected", [(True, 137, 0), (False, 137, 137), (True, 0, 0)])
def test_a_parameter_server_job_whose_chief_finished_ends_completed_despite_a_dead_task(
        finished: bool, code: int, expected: int, tmp_path: Path) -> None:
    # (Not to be retried: Slurm ended it.) The step: a task that exited with `code`.
    fake = mock_slurm(tmp_path / "fake", job_state="CANCELLED").on("srun", Reply(code=code))
    name = "x'; touch PWNED #"
    result = hpc_train("submit", "--nodes", "2", "--ntasks-per-node", "2", "--strategy", "parameter_server",
                       "--name", name, cwd=tmp_path, fake=fake)
    assert result.returncode == 0, result.stderr
    run = tmp_path / "runs" / f"{name}-4242"  # (the id sbatch answered: submitit's pickle is named for it)
    run.mkdir(parents=True, exist_ok=True)
    if finished:
        (run / "state.json").write_text('{\n  "state": "finished"\n}\n')
    [script] = fake.scripts()
    (tmp_path / "submitted.sh").write_text(script)
    job = subprocess.run(["bash", str(tmp_path / "submitted.sh")], cwd=tmp_path, capture_output=True, text=True,
                         env={**without_slurm(), "PATH": fake.install(tmp_path / "bin")["PATH"],
                              "SLURM_JOB_ID": "4242"})
    assert job.returncode == expected, job.stderr
    assert ("a task of the step failed (exit 137), but the chief finished training" in job.stderr) == (
        finished and code != 0)
    assert not list(tmp_path.rglob("PWNED"))


def test_home_is_what_the_submitted_job_activates_or_is_refused_in_one_line(tmp_path: Path) -> None:
    venv = tmp_path / "my env; touch PWNED"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "activate").write_text("# a virtual environment's\n")
    shown = hpc_train("submit", "--nodes", "2", "--home", str(venv), "--dry-run", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"export HPC_TRAIN_HOME={shlex.quote(str(venv))}\n" in shown.stdout  # render's script activates it
    fake = mock_slurm(tmp_path / "fake")
    assert hpc_train("submit", "--nodes", "2", "--home", str(venv), cwd=tmp_path, fake=fake).returncode == 0
    [submitted] = fake.scripts()
    assert f"source {shlex.quote(str(venv / 'bin' / 'activate'))}\n" in submitted
    assert "\nexec python3 -u -m submitit.core._submit " in submitted  # the activated Python: the body's, and the ranks'
    missing = hpc_train("submit", "--nodes", "2", "--home", str(tmp_path / "nothing"), "--dry-run", cwd=tmp_path)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert f"--home {tmp_path / 'nothing'}: neither" in missing.stderr
    local = hpc_train("submit", "--nodes", "2", "--home", str(venv), "--local", cwd=tmp_path)
    assert local.returncode == 2 and "--home with --local" in local.stderr
    assert not list(tmp_path.rglob("PWNED"))


def test_a_job_submitted_before_the_one_layout_still_shows_its_rank_logs(tmp_path: Path) -> None:
    """Rank logs were submitit's JOBID_RANK_log.out and .err once; logs reads them where they are (issue 27, 8)."""
    fake = mock_slurm(tmp_path / "fake", job_state="COMPLETED")
    hpc_train("submit", "--nodes", "2", "--name", "old", cwd=tmp_path, fake=fake)
    folder = tmp_path / "runs" / "old-4242"
    (folder / "4242_1_log.out").write_text("rank one says hi\n")
    (folder / "4242_1_log.err").write_text("rank one warns\n")
    assert hpc_train("logs", "4242", "--rank", "1", cwd=tmp_path, fake=fake).stdout == (
        "rank one says hi\nrank one warns\n")


def test_a_jobs_default_name_is_its_project_folders_as_in_the_starters_script(tmp_path: Path) -> None:
    """(issue 27, 11) Inside myproject, submit named the job hpc-train while init's job.sbatch said myproject."""
    fake = mock_slurm(tmp_path / "fake")
    assert hpc_train("init", "myproject", cwd=tmp_path).returncode == 0
    project = tmp_path / "myproject"
    assert "#SBATCH --job-name=myproject" in (project / "job.sbatch").read_text()
    submitted = hpc_train("submit", "--nodes", "2", "--config", "config.yaml", cwd=project, fake=fake)
    assert submitted.returncode == 0, submitted.stderr
    assert "#SBATCH --job-name=myproject" in fake.scripts()[0]
    assert json.loads((project / "runs" / "myproject-4242" / "job.json").read_text())["name"] == "myproject"
    rendered = hpc_train("render", "--nodes", "2", cwd=project)
    assert "#SBATCH --job-name=myproject" in rendered.stdout
    hidden = tmp_path / ".hidden"
    hidden.mkdir()
    assert "#SBATCH --job-name=hidden" in hpc_train("render", "--nodes", "1", cwd=hidden).stdout


def test_a_refused_submit_stores_no_snapshot(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    for refused in (["--local", "--sweep", "seed=1,2"], ["--local", "--home", str(tmp_path)]):
        result = hpc_train("submit", "--nodes", "1", *refused, "--", "python", "train.py", cwd=tmp_path)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert not (tmp_path / "runs" / "snapshots").exists()


def test_local_binds_this_machines_gpus_a_task_each_and_refuses_more_than_it_has(tmp_path: Path) -> None:
    def local(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hpc_train", "submit", "--local", "--no-snapshot", "--nodes", "1",
                               *args, "--", sys.executable, "-c",
                               "import os; print('GPUS', os.environ['CUDA_VISIBLE_DEVICES'])"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              env={**without_slurm(), "PATH": install_nvidia_smi(tmp_path / "gpus", 2)})

    refused = local("--gpus-per-node", "4", "--name", "four")
    assert (refused.returncode, refused.stdout, refused.stderr) == (2, "", (
        "hpc-train submit: error: --gpus-per-node 4: this machine has 2 GPUs (nvidia-smi -L lists 2); "
        "ask for at most 2\n"))
    assert not (tmp_path / "runs").exists()
    ran = local("--gpus-per-node", "2", "--name", "two")
    assert ran.returncode == 0, ran.stderr
    assert sorted(line for line in ran.stdout.splitlines() if "GPUS" in line) == ["0: GPUS 0", "1: GPUS 1"]
    assert "1: hpc-train bootstrap: bound to GPU 1 by Slurm" in ran.stderr  # the bootstrap kept the launcher's
