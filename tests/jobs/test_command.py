"""A user's own command as every task of a job, as real processes without Slurm (hpc-train launch as srun).

The command gets TF_CONFIG from the bootstrap, Slurm's warning as SIGUSR1 (USR1
or USR2), SIGTERM as it is; its exit is the task's (128 + N for a signal), and
an exit of 75 after a warning makes rank 0 requeue the job.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpc_train.errors import HpcTrainError
from hpc_train.jobs.command import CommandJob, exit_code, supervised_arguments
from hpc_train.jobs.render import render_script
from hpc_train.jobs.spec import JobSpec
from hpc_train.config import TrainConfig
from tests.fake_slurm import without_slurm

HOSTILE = ["x'; touch PWNED #", "$(touch PWNED)", "`touch PWNED`", "semi;colon && touch PWNED"]
# Waits for SIGUSR1 or SIGTERM, notes which in $NOTE.<rank>, and exits 75 (saved, go on later) or 143.
SAVING_SCRIPT = """
import os, signal, sys, time
note = os.environ["NOTE"] + "." + os.environ["SLURM_PROCID"]
def on(signum, frame):
    open(note, "w").write(signal.Signals(signum).name)
    sys.exit(75 if signum == signal.SIGUSR1 else 143)
signal.signal(signal.SIGUSR1, on)
signal.signal(signal.SIGTERM, on)
open(note + ".ready", "w").close()
time.sleep(60)
"""


def launch(tmp_path: Path, *command: str, tasks: int = 2, **env: str) -> subprocess.Popen[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    scontrol = bin_dir / "scontrol"  # records a requeue instead of asking a controller
    scontrol.write_text(f'#!/bin/bash\necho "$@" >> "{tmp_path / "scontrol.calls"}"\n')
    scontrol.chmod(scontrol.stat().st_mode | stat.S_IEXEC)
    environment = {**without_slurm(), "PATH": f"{bin_dir}:{os.environ['PATH']}", **env}
    arguments = supervised_arguments(CommandJob(tuple(command), max_requeues=2))
    return subprocess.Popen([sys.executable, "-m", "hpc_train", "launch", "--nodes", str(tasks), "--",
                             sys.executable, "-m", "hpc_train", *arguments], env=environment, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_for(*paths: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not all(path.exists() for path in paths):
        assert time.monotonic() < deadline, f"never appeared: {paths}"
        time.sleep(0.05)


def test_every_task_runs_the_command_with_its_own_tf_config(tmp_path: Path) -> None:
    job = launch(tmp_path, sys.executable, "-c", "import os; print('TASK', os.environ['TF_CONFIG'])")
    out, err = job.communicate(timeout=60)
    assert job.returncode == 0, err
    tasks = sorted(json.loads(line.split("TASK ", 1)[1])["task"]["index"] for line in out.splitlines() if "TASK" in line)
    assert tasks == [0, 1]
    assert "rank 1 is worker 1 at 127.0.0.2:" in err


@pytest.mark.parametrize("warning", [signal.SIGUSR1, signal.SIGUSR2])
def test_a_warning_reaches_the_command_as_usr1_and_exit_75_requeues_the_job_once(warning: int,
                                                                               tmp_path: Path) -> None:
    note = tmp_path / "note"
    job = launch(tmp_path, sys.executable, "-c", SAVING_SCRIPT, NOTE=str(note))
    wait_for(Path(f"{note}.0.ready"), Path(f"{note}.1.ready"))
    job.send_signal(warning)  # as Slurm's --signal does: to every task (launch passes it on, as srun)
    out, err = job.communicate(timeout=60)
    assert job.returncode == 75, err
    assert Path(f"{note}.0").read_text() == Path(f"{note}.1").read_text() == "SIGUSR1"
    [call] = (tmp_path / "scontrol.calls").read_text().splitlines()  # rank 0 alone asks
    assert call.startswith("requeue ") and "requeued job" in err and "(requeue 1 of at most 2)" in err


def test_sigterm_reaches_the_command_as_it_is_and_nothing_is_requeued(tmp_path: Path) -> None:
    note = tmp_path / "note"
    job = launch(tmp_path, sys.executable, "-c", SAVING_SCRIPT, tasks=1, NOTE=str(note))
    wait_for(Path(f"{note}.0.ready"))
    job.send_signal(signal.SIGTERM)
    job.communicate(timeout=60)
    assert Path(f"{note}.0").read_text() == "SIGTERM"
    assert not (tmp_path / "scontrol.calls").exists()


@pytest.mark.parametrize("command, expected", [(("sh", "-c", "exit 3"), 3), (("sh", "-c", "kill -9 $$"), 137)])
def test_the_tasks_exit_is_the_commands(command: tuple[str, ...], expected: int, tmp_path: Path) -> None:
    job = launch(tmp_path, *command, tasks=1)
    _, err = job.communicate(timeout=60)
    assert job.returncode == expected, err


@pytest.mark.parametrize("script, words", [("", "command not found: '{path}'"),
                                           ("echo hi\n", "cannot run '{path}': Exec format error"),
                                           ("#!/bin/sh\necho hi\n", "cannot run '{path}': Permission denied")])
def test_a_command_that_cannot_start_is_refused_in_one_line(script: str, words: str, tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    if script:
        path.write_text(script)
        path.chmod(0o755 if script.startswith("echo") else 0o644)  # executable without #!, or not executable
    job = launch(tmp_path, str(path), tasks=1)
    _, err = job.communicate(timeout=60)
    assert job.returncode == 2 and "Traceback" not in err, err
    assert f"hpc-train bootstrap: error: {words.format(path=path)}; check the command after --" in err, err


def test_exit_codes_and_the_arguments_that_run_a_command() -> None:
    assert (exit_code(0), exit_code(3), exit_code(-signal.SIGKILL)) == (0, 3, 137)
    assert supervised_arguments(CommandJob(("python", "t.py"), "parameter_server", 2, 4)) == [
        "bootstrap", "--supervise", "--strategy", "parameter_server", "--num-ps", "2", "--max-requeues", "4", "--",
        "python", "t.py"]
    with pytest.raises(HpcTrainError, match="no command after --"):
        CommandJob(())


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_rendered_command_reaches_the_tasks_word_for_word_in_a_real_shell(hostile: str, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"  # runs its command once, as rank 0 of a one-task step
    srun.write_text('#!/bin/bash\nwhile [[ "$1" == --* ]]; do shift; done\n'
                    'SLURM_STEP_NODELIST=localhost SLURM_STEP_TASKS_PER_NODE=1 SLURM_PROCID=0 exec "$@"\n')
    srun.chmod(srun.stat().st_mode | stat.S_IEXEC)
    venv_bin = Path(sys.executable).parent  # the hpc-train the job's environment has
    words = [sys.executable, "-c", "import json, os, sys; json.dump([sys.argv[1:], os.environ['HPC_TRAIN_RUN_DIR']],"
             " open('seen.json', 'w'))", hostile, "$HOME"]
    script = tmp_path / "job.sbatch"
    script.write_text(render_script(JobSpec(nodes=1), TrainConfig(), home=str(tmp_path), command=words))
    env = {**without_slurm(), "PATH": f"{bin_dir}:{venv_bin}:{os.environ['PATH']}", "SLURM_JOB_ID": "7",
           "SLURM_JOB_NAME": "job", "SLURM_JOB_NODELIST": "localhost"}
    result = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    arguments, run_dir = json.loads((tmp_path / "seen.json").read_text())
    assert arguments == [hostile, "$HOME"] and run_dir == str(tmp_path / "runs" / "job-7")
    assert not list(tmp_path.rglob("PWNED"))
