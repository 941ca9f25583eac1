"""The one job body every batch script runs: its start line, its step, the signals it passes on or ignores, and its
exit codes. (Through real shells and a mock srun: tests/login/test_script.py; on a real Slurm: tests/e2e.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpc_train.injob import body
from hpc_train.injob.body import JobBody, kill_on_bad_exit, parse, srun_arguments, start_line
from hpc_train.runs import attempts
from hpc_train.runs.state import read_state
from tests.fake_slurm import waiting_srun, without_slurm


def test_the_start_line_says_which_attempt_where_and_how_many_tasks() -> None:
    job = JobBody(Path("runs/x-12"), nodes=2, tasks_per_node=2)
    assert start_line(job, {"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "n[1-2]"}) == (
        "hpc-train: job 12 on n[1-2], 4 tasks; logs and results in runs/x-12")
    assert start_line(job, {"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "n[3-4]", "SLURM_RESTART_COUNT": "2",
                            "SLURM_NTASKS": "6"}) == (
        "hpc-train: job 12 (restart 2) on n[3-4], 6 tasks; logs and results in runs/x-12")
    assert start_line(JobBody(Path("runs/x-local-20260101-120000")), {}) == (
        "hpc-train: job local-20260101-120000 on this machine, 1 tasks; logs and results in "
        "runs/x-local-20260101-120000")


def test_srun_ends_the_step_on_a_lost_task_except_under_parameter_server() -> None:
    assert [kill_on_bad_exit(strategy) for strategy in ("multiworker", "mirrored", "parameter_server")] == [1, 1, 0]
    assert srun_arguments(JobBody(Path("r"), "parameter_server"), ["cmd"]) == ["--label", "--kill-on-bad-exit=0",
                                                                              "cmd"]
    assert srun_arguments(JobBody(Path("r"), output="r/%t.out", error="r/%t.err"), ["cmd"]) == [
        "--kill-on-bad-exit=1", "--open-mode=append", "--output=r/%t.out", "--error=r/%t.err", "cmd"]


def test_the_arguments_name_the_run_folder_or_make_it_from_the_job() -> None:
    job, command = parse(["--name", "mnist", "--nodes", "2", "--trainer", "--", "hpc-train", "train"],
                         {"SLURM_JOB_ID": "7"}, 0)
    assert job.run_dir == Path("runs/mnist-7") and job.nodes == 2
    assert command == ["hpc-train", "train", "--output-dir", "runs/mnist-7"]
    job, _ = parse(["--name", "mnist", "--", "x"], {"SLURM_JOB_ID": "7", "SLURM_JOB_NAME": "other"}, 0)
    assert job.run_dir == Path("runs/other-7")  # sbatch --job-name: the folder follows, as the job log does
    job, _ = parse(["--run-dir", "d", "--retry-exit-codes", "3,17", "--command", "--", "x"], {}, 0)
    assert (job.retry_exit_codes, job.command, job.max_retries) == ((3, 17), True, None)
    for wrong in (["--name", "x"], ["--name", "x", "--"], ["--nodes", "2", "--", "x"], ["--run-dir", "d", "--nodes",
                                                                                        "two", "--", "x"]):
        with pytest.raises(ValueError):
            parse(wrong, {}, 0)


def test_without_slurm_the_tasks_run_here_and_a_failure_is_not_retried(tmp_path: Path) -> None:
    # Rank 1 fails once rank 0 has said its line (the launcher stops the others at a failure: under load, before
    # rank 0 got to it).
    script = ('echo "rank $SLURM_PROCID of $SLURM_STEP_NUM_TASKS in $HPC_TRAIN_RUN_DIR"; touch "$HPC_TRAIN_RUN_DIR/'
              'said-$SLURM_PROCID"; until [ -e "$HPC_TRAIN_RUN_DIR/said-0" ]; do sleep 0.05; done; exit $SLURM_PROCID')
    result = subprocess.run([sys.executable, "-m", "hpc_train", "job", "--name", "here", "--nodes", "2", "--", "sh",
                             "-c", script], cwd=tmp_path, capture_output=True, text=True, env=without_slurm(),
                            timeout=60)
    assert result.returncode == 1, result.stderr  # rank 1's exit, as the mock launcher gives it
    [run_dir] = (tmp_path / "runs").glob("here-local-*")
    assert f"hpc-train: job {run_dir.name.removeprefix('here-')} on this machine, 2 tasks; logs and results in " \
           f"runs/{run_dir.name}" in result.stderr
    assert f"0: rank 0 of 2 in {run_dir.resolve()}" in result.stdout
    assert "not retried: not a Slurm batch job, run it again to resume" in result.stderr
    [end] = read_state(run_dir)["ended"]  # how the attempt ended, for status once Slurm forgot the job
    assert (end["attempt"], end["nodes"], end["exit"], end["goes_on"]) == (1, "this machine", 1, False)
    assert end["started"] <= end["ended"] and "state" not in read_state(run_dir)
    # A user's command that succeeded: its state.json says it finished, not only that it started (issue 36, 2).
    done = subprocess.run([sys.executable, "-m", "hpc_train", "job", "--run-dir", "runs/done", "--command", "--",
                           "sh", "-c", "exit 0"], cwd=tmp_path, capture_output=True, text=True, env=without_slurm(),
                          timeout=60)
    assert done.returncode == 0, done.stderr
    state = read_state(tmp_path / "runs" / "done")
    assert state["state"] == "finished" and [end["exit"] for end in state["ended"]] == [0]
    assert attempts.how_it_ended(state) == ("COMPLETED", "0")
    wrong = subprocess.run([sys.executable, "-m", "hpc_train", "job", "--name", "x"], capture_output=True, text=True)
    assert wrong.returncode == 2 and wrong.stderr.startswith("usage: hpc-train job ")
    missing = subprocess.run([sys.executable, "-m", "hpc_train", "job", "--name", "x", "--", "no-such-program-xyz"],
                             cwd=tmp_path, capture_output=True, text=True, env=without_slurm(), timeout=60)
    assert missing.returncode == 2 and "hpc-train launch: error: cannot run 'no-such-program-xyz'" in missing.stderr
    assert "Traceback" not in missing.stderr


def wait_for_file(path: Path, process: subprocess.Popen, timeout: float = 30) -> None:
    """Return once `path` exists; fail, saying so, after `timeout` seconds or once `process` ended without it."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, f"the job body ended ({process.returncode}) before {path} appeared"
        assert time.monotonic() < deadline, f"{path} did not appear within {timeout:.0f} s"
        time.sleep(0.05)


@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGUSR2])
def test_a_warning_sent_to_the_body_reaches_srun(signum: int, tmp_path: Path) -> None:
    record, ready = tmp_path / "signals", tmp_path / "ready"
    waiting_srun(tmp_path / "bin", record, ready)
    env = {**without_slurm(), "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "SLURM_JOB_ID": "7"}
    job = subprocess.Popen([sys.executable, "-m", "hpc_train", "job", "--run-dir", "run", "--", "train"],
                           cwd=tmp_path, env=env, text=True, stderr=subprocess.PIPE)
    try:
        wait_for_file(ready, job)  # the body's srun runs: it can pass the signal on
        job.send_signal(signum)
        job.communicate(timeout=30)
    finally:
        job.kill()
    assert job.returncode == 75  # the step's own code (it stopped to go on later: no retry)
    assert record.read_text().split() == [signal.Signals(signum).name[3:], "--label", "--kill-on-bad-exit=1",
                                          f"--task-epilog={(tmp_path / 'run').resolve()}/task-epilog.sh", "train"]


def test_a_body_slurms_sigterm_ends_records_its_end_so_a_forgotten_job_reads_cancelled(tmp_path: Path) -> None:
    """(issue 46, 5) a job body ended by SIGTERM recorded no end: a job Slurm forgot then read `unknown`."""
    record, ready = tmp_path / "signals", tmp_path / "ready"
    waiting_srun(tmp_path / "bin", record, ready)
    env = {**without_slurm(), "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "SLURM_JOB_ID": "7"}
    job = subprocess.Popen([sys.executable, "-m", "hpc_train", "job", "--run-dir", "run", "--", "train"],
                           cwd=tmp_path, env=env, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_file(ready, job)  # the body's srun runs: it can pass the signal on
        job.send_signal(signal.SIGTERM)
        job.wait(timeout=30)
    finally:
        os.killpg(job.pid, signal.SIGKILL)  # (its srun, which Slurm would end: this test's own group only)
    assert job.returncode == -signal.SIGTERM  # it still ends by the signal, as before
    [ended] = attempts.ended_attempts(read_state(tmp_path / "run"))
    assert (ended["attempt"], ended["exit"], ended["goes_on"], ended["signal"]) == (1, 143, False, 15)
    assert attempts.how_it_ended(read_state(tmp_path / "run")) == ("CANCELLED", "0:15")


def test_sigterm_is_ignored_through_the_prologue_and_from_the_epilogue_on(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def requeued_then_terminated(*args: object) -> int:
        os.kill(os.getpid(), signal.SIGTERM)  # Slurm's SIGTERM once the job requeued itself
        return 0

    monkeypatch.setattr("hpc_train.injob.prologue.before_the_step", lambda *args: requeued_then_terminated() + 4)
    monkeypatch.setattr("hpc_train.injob.epilogue.after_the_step", requeued_then_terminated)
    before = signal.getsignal(signal.SIGTERM)
    try:
        assert body.prologue(JobBody(tmp_path), {"SLURM_JOB_ID": "7"}) == 0  # moved off a failed node: ends quietly
        assert signal.getsignal(signal.SIGTERM) == before  # the step itself can be terminated
        assert body.epilogue(JobBody(tmp_path), 137, {}) == 0  # retried: the job is requeued
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, before)


# Each rank checks in as the trainer does; rank 1 once the chief has dropped the stranger (the test's thread then
# writes $STRANGER_DROPPED), so that the stranger reaches the chief first.
CHECK_IN = ("import os, time\n"
            "from pathlib import Path\n"
            "from hpc_train.runs.secret import job_secret\n"
            "from hpc_train.training.rank import parse_tf_config\n"
            "from hpc_train.training.rendezvous import meet\n"
            "while os.environ['SLURM_PROCID'] == '1' and not Path(os.environ['STRANGER_DROPPED']).exists():\n"
            "    time.sleep(0.05)\n"
            "meet(parse_tf_config(os.environ['TF_CONFIG'], 'multiworker'), 30, job_secret(os.environ))\n"
            "print('met, secret in', os.environ['HPC_TRAIN_SECRET_FILE'])\n")


def test_a_stranger_at_the_check_in_cannot_join_delay_or_stop_the_jobs_start(tmp_path: Path) -> None:
    import socket
    import threading

    from tests.net import free_port_block

    base = free_port_block(2)
    heard: list[bytes] = []
    dropped = tmp_path / "stranger-dropped"

    def stranger() -> None:  # without the secret: claims to be rank 1, as soon as the chief listens
        for _ in range(600):
            try:
                with socket.create_connection(("127.0.0.1", base), timeout=20) as connection:
                    lines = connection.makefile("rb")
                    lines.readline()
                    connection.sendall(b"worker 1\t" + b"00" * 32 + b"\t" + b"0" * 64 + b"\n")
                    heard.append(lines.read())
                    dropped.touch()  # rank 1 may come now
                    return
            except OSError:
                time.sleep(0.05)

    thread = threading.Thread(target=stranger, daemon=True)
    thread.start()
    # Within a minute: the stranger did not hold the start to the check-in's timeout (a wait's limit, not a sleep).
    result = subprocess.run([sys.executable, "-m", "hpc_train", "job", "--name", "guarded", "--nodes", "2", "--",
                             sys.executable, "-m", "hpc_train", "bootstrap", "--port-base", str(base), "--",
                             sys.executable, "-c", CHECK_IN], cwd=tmp_path, capture_output=True, text=True,
                            env={**without_slurm(), "STRANGER_DROPPED": str(dropped)}, timeout=60)
    thread.join(timeout=30)
    assert result.returncode == 0, result.stderr
    [run_dir] = (tmp_path / "runs").glob("guarded-local-*")
    secret = run_dir.resolve() / "checkin.secret"
    assert result.stdout.count(f"met, secret in {secret}") == 2  # its path reaches the ranks, not the secret
    assert secret.read_text().strip() not in result.stdout + result.stderr
    assert (secret.stat().st_mode & 0o777, run_dir.stat().st_mode & 0o077) == (0o600, 0)
    assert heard == [b""]  # dropped, told nothing
    assert "0: hpc-train: check-in: dropped a connection from 127.0.0.1 that did not prove it belongs to the job " \
           "(a wrong answer)" in result.stderr


def test_a_node_range_run_here_records_its_attempts_size_as_a_slurm_one_does(tmp_path: Path) -> None:
    """(issue 46, 5) `--local` recorded no sizes: status of a range run here could not say how many nodes it ran on."""
    from hpc_train.injob.sizing import attempt_size

    ranged = JobBody(tmp_path, tasks_per_node=1, node_range="1-2")
    assert body.prologue(ranged, {}) is None  # no Slurm: no prologue of attempts, the step runs
    size = attempt_size("1-2", 1, {})[0]
    assert attempts.attempt_sizes(read_state(tmp_path)) == [(1, f"on {size} of 1-2 nodes")]
    fixed = JobBody(tmp_path / "fixed")
    (tmp_path / "fixed").mkdir()
    assert body.prologue(fixed, {}) is None and read_state(tmp_path / "fixed") == {}


def test_a_retry_inside_the_allocation_runs_the_next_attempt_here_counted_as_a_restart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, str]] = []

    def attempt(job: JobBody, command: list[str], env: dict[str, str], go_on: list[dict[str, str]]) -> int:
        seen.append(dict(env))
        if len(seen) == 1:  # the epilogue gave node2 back (shrink.py): its entry, and the resized job's variables
            attempts.record(tmp_path, {"attempt": 1, "action": "retried", "in_allocation": True})
            go_on.append({**env, "SLURM_JOB_NODELIST": "node[1,3]"})
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # (as the epilogue leaves it)
            return 0
        return 3

    monkeypatch.setattr(body, "run_attempt", attempt)
    before = signal.getsignal(signal.SIGTERM)
    try:
        assert body.run_job(JobBody(tmp_path), ["x"], {"SLURM_JOB_ID": "7", "SLURM_RESTART_COUNT": "0"}) == 3
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the next attempt can be ended again
    finally:
        signal.signal(signal.SIGTERM, before)
    assert [(env["SLURM_RESTART_COUNT"], env.get("SLURM_JOB_NODELIST")) for env in seen] == [
        ("0", None), ("1", "node[1,3]")]
