"""A job started with `sbatch job.sbatch` (render's script, the starter's, a sweep's, slurm/*.sh) leaves the same run
folder as `submit`, job.json included, and status, logs and list know it (issue 27, 2). Each script runs through a
real shell, its srun a fake that honours --output, then hpc-train is asked about it as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hpc_train.config import TrainConfig
from hpc_train.spec.request import JobSpec
from hpc_train.login.script import render_script
from hpc_train.spec.sweep import grid, grid_axes
from tests.fake_slurm import FakeSlurm, Reply, without_slurm
from tests.login.test_script import fake_hpc_train

ROOT = Path(__file__).resolve().parents[2]
# srun: the step as one rank, rank 0, its stdout and stderr into --output (%t the rank) as Slurm's srun writes them.
SRUN = ('out=/dev/stdout\nwhile [[ "$1" == --* ]]; do case "$1" in --output=*) out="${1#--output=}";; esac; shift; '
        'done\nout="${out//%t/0}"\nexec "$@" >> "$out" 2>&1\n')
# The trainer (every verb but `job`): a progress line, as the real one prints it.
TRAINER = 'echo "hpc-train: epoch 1/5  loss 0.5"\n'


def fake_cluster(tmp_path: Path, job_id: str, stdout: Path | None = None) -> dict[str, str]:
    """A fake Slurm whose scontrol says the job runs (`stdout`: where Slurm writes its own log)."""
    written = f" StdOut={stdout}" if stdout else ""
    fake = FakeSlurm(tmp_path / "fake", {
        "srun": Reply(shell=SRUN),
        "sacct": Reply(stderr="sacct: error: Slurm accounting storage is disabled\n", code=1),
        "scontrol": f"JobId={job_id} JobState=RUNNING ExitCode=0:0 RunTime=00:00:42 NodeList=node[1-2]{written}\n",
        "squeue": f"{job_id} RUNNING\n",
    })
    env = fake.install(tmp_path / "bin")
    fake_hpc_train(tmp_path / "bin", TRAINER)
    return {**without_slurm(), "PATH": env["PATH"]}


def hpc_train(work: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "hpc_train", *args], cwd=work, env=env, capture_output=True,
                            text=True, timeout=120)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def sbatch(script: Path, work: Path, env: dict[str, str], slurm: dict[str, str]) -> None:
    """What Slurm does with `sbatch SCRIPT`: runs it in the submit directory with the job's variables."""
    work.mkdir(exist_ok=True)
    result = subprocess.run(["bash", str(script)], cwd=work, env={**env, **slurm}, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr


def test_a_rendered_script_started_with_sbatch_is_followed_like_a_submitted_job(tmp_path: Path) -> None:
    env = fake_cluster(tmp_path, "4242")
    script = tmp_path / "job.sbatch"
    script.write_text(render_script(JobSpec(nodes=2, name="myproject"), TrainConfig(), home=str(tmp_path)))
    work = tmp_path / "work"
    sbatch(script, work, env, {"SLURM_JOB_ID": "4242", "SLURM_JOB_NAME": "myproject", "SLURM_JOB_NUM_NODES": "2",
                               "SLURM_NTASKS": "2", "SLURM_JOB_NODELIST": "node[1-2]"})
    record = json.loads((work / "runs" / "myproject-4242" / "job.json").read_text())
    assert (record["job_id"], record["name"], record["folder"], record["nodes"], record["tasks"],
            record["strategy"], record["command"]) == ("4242", "myproject", "runs/myproject-4242", 2, 2,
                                                       "multiworker", None)
    status = hpc_train(work, env, "status", "4242")
    assert status.returncode == 0, status.stderr
    assert "job 4242 (myproject): running" in status.stdout
    assert "last:    hpc-train: epoch 1/5  loss 0.5" in status.stdout
    listed = hpc_train(work, env, "list").stdout.splitlines()
    assert listed[1].split()[:3] == ["4242", "myproject", "running"]
    assert hpc_train(work, env, "logs", "4242").stdout == "hpc-train: epoch 1/5  loss 0.5\n"
    # Requeued, it runs again in the same folder: the record stays as it was.
    sbatch(script, work, env, {"SLURM_JOB_ID": "4242", "SLURM_JOB_NAME": "myproject", "SLURM_RESTART_COUNT": "1",
                               "SLURM_JOB_NUM_NODES": "2", "SLURM_NTASKS": "2"})
    assert json.loads((work / "runs" / "myproject-4242" / "job.json").read_text()) == record
    # No snapshot (plain sbatch runs the code on disk), but where the code came from all the same.
    provenance = json.loads((work / "runs" / "myproject-4242" / "provenance.json").read_text())
    assert (provenance["snapshot"], provenance["commit"], provenance["submit_dir"]) == (None, None, str(work))


def test_a_user_command_started_with_sbatch_is_recorded_as_that_command(tmp_path: Path) -> None:
    env = fake_cluster(tmp_path, "77")
    script = tmp_path / "job.sbatch"
    script.write_text(render_script(JobSpec(nodes=1, name="cmd"), TrainConfig(), home=str(tmp_path),
                                    command=["python", "train.py", "--lr", "it's"]))
    sbatch(script, tmp_path / "work", env, {"SLURM_JOB_ID": "77", "SLURM_JOB_NAME": "cmd"})
    record = json.loads((tmp_path / "work" / "runs" / "cmd-77" / "job.json").read_text())
    assert record["command"] == ["python", "train.py", "--lr", "it's"] and record["nodes"] == 1


def test_a_sweep_started_with_sbatch_makes_the_sweeps_record_as_its_elements_start(tmp_path: Path) -> None:
    env = fake_cluster(tmp_path, "900_1")
    sweep = grid(grid_axes(["learning_rate=0.01,0.001"]))
    script = tmp_path / "sweep.sbatch"
    script.write_text(render_script(JobSpec(nodes=1, name="sw"), TrainConfig(), home=str(tmp_path), sweep=sweep))
    work = tmp_path / "work"
    array = {"SLURM_JOB_NAME": "sw", "SLURM_ARRAY_JOB_ID": "900", "SLURM_ARRAY_TASK_COUNT": "2"}
    sbatch(script, work, env, {**array, "SLURM_JOB_ID": "901", "SLURM_ARRAY_TASK_ID": "1"})
    element = json.loads((work / "runs" / "sw-900_1" / "job.json").read_text())
    assert (element["job_id"], element["sweep"], element["folder"]) == ("900_1", "900", "runs/sw-900_1")
    record = json.loads((work / "runs" / "sw-900" / "job.json").read_text())
    assert (record["job_id"], record["sweep"], record["elements"]) == ("900", "900", [{}, {"learning_rate": 0.001}])
    sbatch(script, work, env, {**array, "SLURM_JOB_ID": "900", "SLURM_ARRAY_TASK_ID": "0"})
    record = json.loads((work / "runs" / "sw-900" / "job.json").read_text())
    assert record["elements"] == [{"learning_rate": 0.01}, {"learning_rate": 0.001}]
    tails = hpc_train(work, env, "logs", "900")
    assert tails.returncode == 0 and "== 900_1 (learning_rate=0.001): runs/sw-900_1/logs/rank-0.out" in tails.stdout
    assert "hpc-train: epoch 1/5  loss 0.5" in hpc_train(work, env, "logs", "900_1").stdout


def test_a_hand_written_job_script_started_with_sbatch_is_followed_too(tmp_path: Path) -> None:
    env = fake_cluster(tmp_path, "55")
    home = tmp_path / "home"
    (home / "env").mkdir(parents=True)
    (home / "env" / "activate.sh").write_text("")  # the environment: the fake hpc-train on PATH
    sbatch(ROOT / "slurm" / "mnist_2node.sh", tmp_path / "work", {**env, "HPC_TRAIN_HOME": str(home)},
           {"SLURM_JOB_ID": "55", "SLURM_JOB_NAME": "mnist-2node", "SLURM_JOB_NUM_NODES": "2", "SLURM_NTASKS": "2"})
    record = json.loads((tmp_path / "work" / "runs" / "mnist-2node-55" / "job.json").read_text())
    assert (record["job_id"], record["nodes"], record["tasks"]) == ("55", 2, 2)
    assert "job 55 (mnist-2node): running" in hpc_train(tmp_path / "work", env, "status", "55").stdout


def test_a_job_run_here_without_slurm_is_recorded_as_a_local_one(tmp_path: Path) -> None:
    from hpc_train.injob.body import JobBody
    from hpc_train.injob.started_with_sbatch import JobShape, record_job

    folder = tmp_path / "runs" / "mine-local-20260101-120000"
    shape = JobShape.of(JobBody(folder, nodes=2, tasks_per_node=2), ["hpc-train", "train"], under_slurm=False)
    record_job(folder, shape, {}, 1.0)
    record = json.loads((folder / "job.json").read_text())
    assert (record["job_id"], record["name"], record["tasks"], record["submitted"]) == (
        "local-20260101-120000", "mine", 4, 1.0)


def test_the_record_a_job_writes_never_replaces_submits(tmp_path: Path) -> None:
    from hpc_train.runs.folders import JobRecord

    first = JobRecord("1", "a", str(tmp_path / "a-1"), 1, 1, "multiworker", 1.0)
    assert first.write_new() and not JobRecord("1", "b", first.folder, 2, 2, "multiworker", 2.0).write_new()
    assert json.loads((tmp_path / "a-1" / "job.json").read_text())["name"] == "a"
    assert os.listdir(tmp_path / "a-1") == ["job.json"]


def test_the_ranks_of_a_hand_written_script_are_read_from_the_batch_log_they_are_labelled_in(tmp_path: Path) -> None:
    """slurm/*.sh run srun --label into the batch log (no logs/ of their own): logs and status read them there."""
    work, home = tmp_path / "work", tmp_path / "home"
    (home / "env").mkdir(parents=True)
    (home / "env" / "activate.sh").write_text("")
    batch_log = work / "slurm-mnist-2node-56.out"
    labelled = ('while [[ "$1" == --* ]]; do shift; done\n'
                '"$@" 2>&1 | sed "s/^/0: /"; echo "1: hpc-train: rank 1 says hi"\n')
    fake = FakeSlurm(tmp_path / "fake", {
        "srun": Reply(shell=labelled),
        "sacct": Reply(stderr="sacct: error: Slurm accounting storage is disabled\n", code=1),
        "scontrol": f"JobId=56 JobState=RUNNING ExitCode=0:0 RunTime=00:00:42 NodeList=node[1-2] StdOut={batch_log}\n",
        "squeue": "56 RUNNING\n"})
    env = {**without_slurm(), "PATH": fake.install(tmp_path / "bin")["PATH"]}
    fake_hpc_train(tmp_path / "bin", TRAINER)
    work.mkdir()
    job = subprocess.run(["bash", str(ROOT / "slurm" / "mnist_2node.sh")], cwd=work, capture_output=True, text=True,
                         timeout=120, env={**env, "HPC_TRAIN_HOME": str(home), "SLURM_JOB_ID": "56",
                                           "SLURM_JOB_NAME": "mnist-2node", "SLURM_NTASKS": "2"})
    assert job.returncode == 0, job.stderr
    batch_log.write_text(job.stderr + job.stdout)  # where Slurm writes the batch script's output
    assert hpc_train(work, env, "logs", "56").stdout == "hpc-train: epoch 1/5  loss 0.5\n"
    assert hpc_train(work, env, "logs", "56", "--rank", "1").stdout == "hpc-train: rank 1 says hi\n"
    assert "last:    hpc-train: epoch 1/5  loss 0.5" in hpc_train(work, env, "status", "56").stdout


def test_a_scripts_own_log_written_where_sbatch_ran_is_linked_into_its_run_folder(tmp_path: Path) -> None:
    """(issue 46, 5) one place for a job's own log, whatever submitted it: Slurm opens a hand-submitted script's
    log where sbatch ran (its folder did not exist yet); the job body links it into runs/NAME-JOBID/ as it starts."""
    work = tmp_path / "work"
    written = work / "slurm-myproject-77.out"
    env = fake_cluster(tmp_path, "77", stdout=written)
    script = tmp_path / "job.sbatch"
    script.write_text(render_script(JobSpec(nodes=1, name="myproject"), TrainConfig(), home=str(tmp_path)))
    work.mkdir()
    written.write_text("hpc-train: job 77 on node1, 1 task\n")  # (what Slurm writes there, the batch shell's)
    sbatch(script, work, env, {"SLURM_JOB_ID": "77", "SLURM_JOB_NAME": "myproject", "SLURM_JOB_NUM_NODES": "1",
                               "SLURM_NTASKS": "1", "SLURM_JOB_NODELIST": "node1"})
    place = work / "runs" / "myproject-77" / "slurm-myproject-77.out"
    assert place.is_symlink() and place.resolve() == written
    shown = hpc_train(work, env, "logs", "77", "--job")
    assert shown.returncode == 0 and shown.stdout.splitlines()[:2] == [
        "==> runs/myproject-77/slurm-myproject-77.out <==", "hpc-train: job 77 on node1, 1 task"], shown.stdout
