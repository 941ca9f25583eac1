"""A user's own command as every task of a job, as real processes without Slurm (hpc-train launch as srun).

The command gets TF_CONFIG from the bootstrap, Slurm's warning as SIGUSR1 (USR1
or USR2), SIGTERM as it is; its exit is the task's (128 + N for a signal), and
an exit of 75 after a warning makes rank 0 requeue the job.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpc_train.errors import HpcTrainError
from hpc_train.injob.supervisor import (REQUEUE_GRACE_SECONDS, CommandJob, Relay, exit_code,
                                        supervised_arguments)
from hpc_train.login.script import render_script
from hpc_train.spec.request import JobSpec
from hpc_train.config import TrainConfig
from tests.fake_slurm import FakeSlurm, Reply, without_slurm

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


# As TensorFlow's PreemptionCheckpointHandler off Google Cloud: saves on SIGTERM and exits 42; USR1 would kill it.
PREEMPTION_SCRIPT = """
import os, signal, sys, time
note = os.environ["NOTE"] + "." + os.environ["SLURM_PROCID"]
def on(signum, frame):
    open(note, "w").write(signal.Signals(signum).name)
    sys.exit(42)
signal.signal(signal.SIGTERM, on)
open(note + ".ready", "w").close()
time.sleep(60)
"""


def launch(tmp_path: Path, *command: str, tasks: int = 2, command_signal: str = "USR1", keras: str = "auto",
           **env: str) -> subprocess.Popen[str]:
    # scontrol takes a requeue instead of asking a controller (scontrol_lines reads what it was asked).
    path = FakeSlurm(tmp_path / "fake", {"scontrol": ""}).install(tmp_path / "bin")["PATH"]
    # (This process may have set TF_USE_LEGACY_KERAS itself, importing hpc-train's trainer: not the user's choice.)
    inherited = {name: value for name, value in without_slurm().items() if name != "TF_USE_LEGACY_KERAS"}
    environment = {**inherited, "PATH": path, **env}
    arguments = supervised_arguments(CommandJob(tuple(command), max_requeues=2, command_signal=command_signal,
                                                keras=keras))
    return subprocess.Popen([sys.executable, "-m", "hpc_train", "launch", "--nodes", str(tasks), "--",
                             sys.executable, "-m", "hpc_train", *arguments], env=environment, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def scontrol_lines(tmp_path: Path) -> list[str]:
    """What the command's ranks asked scontrol (launch's fake)."""
    return FakeSlurm.at(tmp_path / "fake").lines("scontrol")


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
    # Rank 0's exit ends the step: rank 1 stops waiting for it then, not after the whole grace period (the wait's
    # limit, short of it).
    out, err = job.communicate(timeout=REQUEUE_GRACE_SECONDS * 0.8)
    assert job.returncode == 75, err
    assert Path(f"{note}.0").read_text() == Path(f"{note}.1").read_text() == "SIGUSR1"
    [call] = scontrol_lines(tmp_path)  # rank 0 alone asks
    assert call.startswith("scontrol requeue ") and "requeueing job" in err and "(requeue 1 of at most 2)" in err


@pytest.mark.parametrize("warning", [signal.SIGUSR1, signal.SIGUSR2])
def test_with_command_signal_term_the_warning_is_a_sigterm_and_exit_42_requeues(warning: int, tmp_path: Path) -> None:
    note = tmp_path / "note"
    job = launch(tmp_path, sys.executable, "-c", PREEMPTION_SCRIPT, command_signal="TERM", NOTE=str(note))
    wait_for(Path(f"{note}.0.ready"), Path(f"{note}.1.ready"))
    job.send_signal(warning)  # Slurm's warning, to every process of every task: the command ignores USR1/USR2
    out, err = job.communicate(timeout=60)
    assert job.returncode == 42, err
    assert Path(f"{note}.0").read_text() == Path(f"{note}.1").read_text() == "SIGTERM"
    [call] = scontrol_lines(tmp_path)
    assert call.startswith("scontrol requeue ") and "the command stopped to go on later (exit 42); requeueing job" in err


def test_a_warning_while_the_command_starts_waits_until_it_catches_sigterm(tmp_path: Path) -> None:
    note, go = tmp_path / "note", tmp_path / "go"
    # The command starts (as TensorFlow's import does, for seconds) before its handler catches SIGTERM.
    starting = f"import os, time\nopen(os.environ['NOTE'] + '.' + os.environ['SLURM_PROCID'] + '.started', 'w')\n" \
               f"while not os.path.exists({str(go)!r}): time.sleep(0.01)\n"
    job = launch(tmp_path, sys.executable, "-c", starting + PREEMPTION_SCRIPT, command_signal="TERM", NOTE=str(note))
    wait_for(Path(f"{note}.0.started"), Path(f"{note}.1.started"))
    job.send_signal(signal.SIGUSR2)  # the warning, before either command catches SIGTERM: passed on once they do
    assert job.stderr is not None
    holding = 0
    while holding < 2:  # both ranks say they hold it: only then may the commands catch SIGTERM
        line = job.stderr.readline()
        assert line, "the ranks ended without holding the warning"
        holding += "the time-limit warning waits until the command catches SIGTERM" in line
    go.touch()
    out, err = job.communicate(timeout=60)
    assert job.returncode == 42, err  # saved and requeued, not killed by the signal it was about to catch
    assert Path(f"{note}.0").read_text() == Path(f"{note}.1").read_text() == "SIGTERM"
    assert "passed the time-limit warning on as SIGTERM after" in err


def test_a_warning_before_the_command_started_is_passed_on_as_it_starts(tmp_path: Path) -> None:
    go = tmp_path / "go"
    relay, before = Relay(signal.SIGTERM), signal.getsignal(signal.SIGUSR2)
    relay.install([signal.SIGUSR2])
    try:
        os.kill(os.getpid(), signal.SIGUSR2)  # Slurm's warning while the rank is placed: its command not started
        catcher = f"import os, signal, sys, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.01)\n" \
                  "signal.signal(signal.SIGTERM, lambda *_: sys.exit(42))\ntime.sleep(60)\n"
        child = subprocess.Popen([sys.executable, "-c", catcher],
                                 preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))
        relay.attach(child)
        go.touch()
        assert child.wait(timeout=60) == 42 and relay.warned
    finally:
        signal.signal(signal.SIGUSR2, before)


def test_sigterm_reaches_the_command_as_it_is_and_nothing_is_requeued(tmp_path: Path) -> None:
    note = tmp_path / "note"
    job = launch(tmp_path, sys.executable, "-c", SAVING_SCRIPT, tasks=1, NOTE=str(note))
    wait_for(Path(f"{note}.0.ready"))
    job.send_signal(signal.SIGTERM)
    job.communicate(timeout=60)
    assert Path(f"{note}.0").read_text() == "SIGTERM"
    assert scontrol_lines(tmp_path) == []


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
    assert supervised_arguments(CommandJob(("t",), keras="3", command_signal="TERM"))[-6:] == [
        "--keras", "3", "--command-signal", "TERM", "--", "t"]
    with pytest.raises(HpcTrainError, match="--command-signal 'HUP': expected USR1 or TERM"):
        CommandJob(("t",), command_signal="HUP")
    with pytest.raises(HpcTrainError, match="--keras '4': expected one of auto, 2, 3"):
        CommandJob(("t",), keras="4")


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_rendered_command_reaches_the_tasks_word_for_word_in_a_real_shell(hostile: str, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # an srun that runs its command once, as rank 0 of a one-task step
    FakeSlurm(tmp_path / "fake", {"srun": Reply(shell='while [[ "$1" == --* ]]; do shift; done\n'
                                                     'SLURM_STEP_NODELIST=localhost SLURM_STEP_TASKS_PER_NODE=1 '
                                                     'SLURM_PROCID=0 exec "$@"\n')}).install(bin_dir)
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


NOISY = """
import os, sys
sys.stderr.write("I0000 00:00:1795426515.986455    4268 cudart_stub.cc:31] Could not find cuda drivers on your "
                 "machine, GPU will not be used.\\n")
sys.stderr.write("the command's own line\\n")
print("KERAS", os.environ.get("TF_USE_LEGACY_KERAS"))
"""


def test_a_commands_log_is_clean_of_tensorflows_noise_and_its_keras_is_tf_keras(tmp_path: Path) -> None:
    job = launch(tmp_path, sys.executable, "-c", NOISY, tasks=1)
    out, err = job.communicate(timeout=60)
    assert job.returncode == 0, err
    assert "0: KERAS 1" in out  # tf.keras is tf-keras: TensorFlow's tutorials run as they are
    assert "0: the command's own line" in err and "cudart_stub" not in err
    assert re.search(r"rank 0 is worker 0 at \S+, GPUs: none bound \(no CUDA_VISIBLE_DEVICES: any GPU of the node is "
                     r"visible\), Keras: tf-keras 2\.\d+", err), err


def test_the_users_own_keras_choice_stands(tmp_path: Path) -> None:
    job = launch(tmp_path, sys.executable, "-c", NOISY, tasks=1, TF_USE_LEGACY_KERAS="0")
    out, err = job.communicate(timeout=60)
    assert "0: KERAS 0" in out and "Keras: Keras 3" in err and "(TF_USE_LEGACY_KERAS=0 as set)" in err


KERAS_3_FAILURE = """
import sys
sys.stderr.write("Traceback (most recent call last):\\n  ...\\nValueError: Attempt to convert a value "
                 "(PerReplica:{0: <tf.Tensor: shape=(), dtype=float32>}) with an unsupported type\\n")
sys.exit(1)
"""


def test_a_command_failing_with_keras_3s_known_error_ends_its_log_saying_why(tmp_path: Path) -> None:
    job = launch(tmp_path, sys.executable, "-c", KERAS_3_FAILURE, tasks=1, keras="3")
    _, err = job.communicate(timeout=60)
    assert job.returncode == 1
    last = [line for line in err.splitlines() if line.startswith("0: ")][-1]
    assert last.startswith("0: hpc-train: hint: model.fit under MultiWorkerMirroredStrategy fails this way with "
                           "Keras 3, and this command ran with Keras 3") and "pip install tf-keras~=" in last
    # With tf-keras as tf.keras the same text is not Keras 3's failure: no hint.
    job = launch(tmp_path, sys.executable, "-c", KERAS_3_FAILURE, tasks=1)
    _, err = job.communicate(timeout=60)
    assert job.returncode == 1 and "hint" not in err


def test_keras_and_the_command_signal_reach_the_rendered_and_submitted_jobs(tmp_path: Path) -> None:
    from tests.login.test_submission import hpc_train

    rendered = hpc_train("render", "--nodes", "2", "--keras", "3", "--command-signal", "TERM", "--", "python", "t.py",
                         cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    assert "bootstrap --supervise --strategy multiworker --max-requeues 5 --keras 3 --command-signal TERM -- python " \
           "t.py" in rendered.stdout
    refused = hpc_train("submit", "--nodes", "2", "--command-signal", "TERM", "--dry-run", cwd=tmp_path)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "--keras and --command-signal apply to your own command after --" in refused.stderr


def test_the_command_writes_into_the_ranks_own_tmpdir_which_is_gone_however_it_ended(tmp_path: Path) -> None:
    """Issue 46: TensorFlow's autograph files go to $TMPDIR; the rank's own, removed even after a SIGKILL."""
    base = tmp_path / "node-tmp"
    base.mkdir()
    writes = ('import os, sys, tempfile; open(os.path.join(tempfile.gettempdir(), "__autograph_generated_file1.py"), '
              '"w").close(); print("TMP", os.environ["TMPDIR"], flush=True); os.kill(os.getpid(), 9)')
    job = launch(tmp_path, sys.executable, "-c", writes, tasks=1, TMPDIR=str(base))
    out, err = job.communicate(timeout=60)
    assert job.returncode == 137, err
    [used] = [Path(line.split("TMP ", 1)[1]) for line in out.splitlines() if "TMP " in line]
    assert used.parent == base and re.fullmatch(r"hpc-train-\d+-0-0-0", used.name), out
    assert os.listdir(base) == []
