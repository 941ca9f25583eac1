"""The job body's tracking (tracking/job.py, injob/tracked.py) against an MLflow client in memory: the tags it
gives the run, and how the run ends when an attempt ends before or during its step."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hpc_train.exitcodes import EXIT_RETRIES_SPENT
from hpc_train.injob.body import JobBody, run_job
from hpc_train.injob.prologue import EXIT_MOVED
from hpc_train.injob import tracked
from hpc_train.injob.tracked import ASK_SECONDS, KILL_SECONDS, after_term, status_on_term
from hpc_train.runs.metrics import write_metrics
from hpc_train.runs.state import read_tracking
from hpc_train.tracking import job as tracking_job
from hpc_train.tracking import mlflow_run
from hpc_train.tracking.job import JobTracking
from hpc_train.tracking.settings import status_from_folder
from tests.fake_slurm import without_slurm
from tests.tracking.fake_mlflow import FakeMlflow, fake_mlflow  # noqa: F401 - the fixture

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def run_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "submit" / "runs" / "job-12"
    folder.mkdir(parents=True)
    (folder / "job.json").write_text(json.dumps({"job_id": "12", "name": "job", "folder": "runs/job-12"}))
    return folder


def test_the_commit_comes_from_provenance_json_not_from_git_where_the_job_runs(
        fake_mlflow: FakeMlflow, tmp_path: Path, monkeypatch) -> None:
    folder = run_folder(tmp_path)
    (folder / "provenance.json").write_text(json.dumps(
        {"commit": COMMIT, "dirty": True, "snapshot": {"digest": "abc123", "path": "/x"}}))
    checkout = tmp_path / "elsewhere"  # the job's cwd: a git checkout of another commit
    checkout.mkdir()
    for command in (["init", "-q"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
                                     "-m", "other"]):
        subprocess.run(["git", *command], cwd=checkout, check=True, capture_output=True)
    monkeypatch.chdir(checkout)
    tracking = JobTracking.for_job(folder, "sqlite:////x/mlflow.db", None, {}, print)
    tracking.start()
    tracking.finish(0, 0)
    [run] = fake_mlflow.runs.values()
    assert run.tags["mlflow.source.git.commit"] == COMMIT
    assert (run.tags["hpc_train.git_dirty"], run.tags["hpc_train.snapshot"]) == ("true", "abc123")
    assert run.tags["hpc_train.run_dir"] == str(folder)
    assert run.status == "FINISHED"


def test_a_relative_store_that_reaches_the_job_is_the_submit_directorys(tmp_path: Path, monkeypatch) -> None:
    folder = run_folder(tmp_path)
    (folder / "provenance.json").write_text(json.dumps({"submit_dir": str(tmp_path / "submit")}))
    monkeypatch.chdir(tmp_path)  # the job runs elsewhere: in the code snapshot
    env = {"MLFLOW_TRACKING_URI": "mlruns"}
    assert JobTracking.for_job(folder, "sqlite:///x.db", None, env, print).settings.uri == \
        f"sqlite:///{tmp_path}/submit/x.db"
    assert JobTracking.for_job(folder, None, None, env, print).settings.uri == f"{tmp_path}/submit/mlruns"


def earlier_attempts_run(folder: Path, fake: FakeMlflow) -> str:
    """The run an earlier attempt opened and left RUNNING (the epilogue retried the job)."""
    earlier = JobTracking.for_job(folder, "sqlite:////x/mlflow.db", None, {}, print)
    earlier.start()
    earlier.finish(1, 0)
    [run_id] = fake.runs
    assert fake.runs[run_id].status == "RUNNING"
    return run_id


@pytest.mark.parametrize("said, status", [(EXIT_RETRIES_SPENT, "FAILED"), (EXIT_MOVED, "RUNNING")])
def test_a_job_the_prologue_ends_ends_its_run_failed_and_one_it_moves_keeps_it_running(
        fake_mlflow: FakeMlflow, tmp_path: Path, monkeypatch, said: int, status: str) -> None:
    folder = run_folder(tmp_path)
    run_id = earlier_attempts_run(folder, fake_mlflow)
    monkeypatch.setattr("hpc_train.injob.prologue.before_the_step", lambda *args: said)
    job = JobBody(folder, track="mlflow", tracking_uri="sqlite:////x/mlflow.db")
    code = run_job(job, ["true"], {**without_slurm(), "SLURM_JOB_ID": "12", "SLURM_RESTART_COUNT": "1"})
    assert code == (1 if said == EXIT_RETRIES_SPENT else 0)
    assert list(fake_mlflow.runs) == [run_id]  # the job's one run, no other
    assert fake_mlflow.runs[run_id].status == status


def test_on_slurms_sigterm_a_cancelled_jobs_run_ends_killed_and_a_requeued_ones_goes_on() -> None:
    since = 100.0
    assert status_on_term({"JobState": "COMPLETING", "Restarts": "0"}, 0, {}, since) == "KILLED"  # scancel
    assert status_on_term({"JobState": "COMPLETING", "Restarts": "2"}, 2, {}, since) == "KILLED"  # its 3rd attempt
    assert status_on_term({"JobState": "COMPLETING", "Restarts": "1"}, 0, {}, since) is None  # scontrol requeue
    assert status_on_term({"JobState": "TIMEOUT", "Restarts": "0"}, 0, {}, since) == "KILLED"  # its steps ended
    ending = {"JobState": "COMPLETING", "Restarts": "0"}
    assert status_on_term(ending, 0, {"state": "requeued", "time": 150}, since) is None  # the trainer's
    assert status_on_term(ending, 0, {"state": "requeued", "time": 50}, since) == "KILLED"  # an earlier attempt's
    # a preemption with GraceTime signals first, requeues after (Restarts not counted yet); a bare scancel --signal
    assert status_on_term({"JobState": "RUNNING", "Restarts": "0"}, 0, {}, since) is None
    assert status_on_term({}, 0, {}, since) is None  # Slurm did not answer: left to the next attempt, or track sync
    # ... unless the body ends by that SIGTERM (`scancel --full --signal=TERM`): then nothing else would end the run
    assert status_on_term({"JobState": "RUNNING", "Restarts": "0"}, 0, {}, since, dies=True) == "KILLED"
    assert status_on_term({"JobState": "COMPLETING", "Restarts": "1"}, 0, {}, since, dies=True) is None  # requeued
    assert status_on_term({}, 0, {}, since, dies=True) is None


def test_a_killed_run_says_killed_first_then_logs_what_it_lacks(fake_mlflow: FakeMlflow, tmp_path: Path) -> None:
    folder = run_folder(tmp_path)
    tracking = JobTracking.for_job(folder, "sqlite:////x/mlflow.db", None, {}, print)
    tracking.start()
    write_metrics(folder, {"epochs": [{"epoch": 1, "loss": 0.5}]})
    tracking.kill(5.0)
    [(run_id, run)] = fake_mlflow.runs.items()
    assert fake_mlflow.calls[:2] == ["create_run run1", "set_terminated run1 KILLED"]  # before Slurm's SIGKILL
    assert run.status == "KILLED" and run.metrics["loss"] == [(1, 0.5)]
    assert read_tracking(folder)["verdict"] == "KILLED"  # track sync's word too


class HeldMlflow(FakeMlflow):
    """A tracker whose first logging of epochs is held until `release` is set (the thread's call in progress)."""

    def __init__(self) -> None:
        super().__init__()
        self.held, self.again, self.release = threading.Event(), threading.Event(), threading.Event()

    def log_batch(self, run_id: str, metrics: Any = (), params: Any = (), tags: Any = ()) -> None:
        if metrics and not self.held.is_set():
            self.held.set()
            self.release.wait(10)
        elif metrics:
            self.again.set()
        super().log_batch(run_id, metrics, params, tags)


def test_a_kill_while_the_thread_logs_logs_each_epoch_once_and_loses_no_write(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("mlflow")
    held = HeldMlflow()
    monkeypatch.setattr(mlflow_run, "client", lambda settings: held)
    monkeypatch.setattr(tracking_job, "POLL_SECONDS", 3600.0)  # the test plays the thread's part itself
    folder = run_folder(tmp_path)
    tracking = JobTracking.for_job(folder, "sqlite:////x/mlflow.db", None, {}, print)
    tracking.start()
    write_metrics(folder, {"epochs": [{"epoch": 1, "loss": 0.5}]})
    logger = threading.Thread(target=tracking._log_new)
    logger.start()
    assert held.held.wait(10)  # the thread is logging epoch 1
    killer = threading.Thread(target=tracking.kill, args=(6.0,))
    killer.start()
    held.again.wait(0.5)  # without the lock, kill logs epoch 1 as well, meanwhile
    held.release.set()
    logger.join(10)
    killer.join(10)
    run = held.runs["run1"]
    assert run.status == "KILLED" and run.metrics["loss"] == [(1, 0.5)]  # once
    known = read_tracking(folder)
    assert (known["verdict"], known["status"], known["closed"], known["last_epoch"]) == ("KILLED", "KILLED", True, 1)


def a_stuck_logger(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, poll: float) -> tuple[JobTracking, HeldMlflow]:
    """A started tracking whose logging thread is stuck in the tracker (a dead server), the lock held."""
    held = HeldMlflow()
    monkeypatch.setattr(mlflow_run, "client", lambda settings: held)
    monkeypatch.setattr(tracking_job, "POLL_SECONDS", poll)
    folder = run_folder(tmp_path)
    tracking = JobTracking.for_job(folder, "sqlite:////x/mlflow.db", None, {}, print)
    tracking.start()
    write_metrics(folder, {"epochs": [{"epoch": 1, "loss": 0.5}]})
    if poll > 60:  # the test plays the thread's part itself
        threading.Thread(target=tracking._log_new, daemon=True).start()
    assert held.held.wait(10)
    return tracking, held


def test_a_kill_with_the_logging_thread_stuck_takes_no_longer_than_it_was_given(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    tracking, held = a_stuck_logger(monkeypatch, tmp_path, 3600.0)
    began = time.monotonic()
    tracking.kill(KILL_SECONDS)
    took = time.monotonic() - began
    held.release.set()
    # the question to Slurm and the kill: well within the test cluster's KillWait of 5 s (3 s, as documented)
    assert took < KILL_SECONDS + 0.4 and ASK_SECONDS + took < 3.4, took  # (without the deadline: 2.67 s)
    assert read_tracking(tracking.run_dir)["verdict"] == "KILLED"


def test_finish_with_the_logging_thread_stuck_returns_within_close_seconds(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(tracking_job, "CLOSE_SECONDS", 1.0)
    tracking, held = a_stuck_logger(monkeypatch, tmp_path, 0.05)
    began = time.monotonic()
    tracking.finish(0, 0)
    took = time.monotonic() - began
    held.release.set()
    assert took < 1.5, took  # not the thread's join, then the lock's wait, then the close: 3 x CLOSE_SECONDS
    assert read_tracking(tracking.run_dir)["verdict"] == "FINISHED"  # track sync's word, the thread stuck or not


def test_slurms_sigterm_then_does_what_it_did_before_and_nothing_to_the_run_once_it_is_ending(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert [after_term(handler) for handler in (signal.SIG_IGN, signal.SIG_DFL, None, print)] == \
        ["ignore", "default", "default", "call"]
    said: list[Any] = []
    monkeypatch.setattr(tracked.SlurmClient, "local", lambda env: SimpleNamespace(
        show_job=lambda job, timeout: {"JobState": "COMPLETING", "Restarts": "0"}))  # scancel
    monkeypatch.setattr(tracked, "os", SimpleNamespace(getpid=lambda: 0, kill=lambda pid, signum: said.append("died")))
    tracking = SimpleNamespace(finishing=False, run_dir=tmp_path, since=0.0, kill=lambda seconds: said.append("kill"))
    env = {"SLURM_JOB_ID": "12"}
    tracked._ending_on_term(tracking, env, lambda signum, frame: said.append(f"previous {signum}"))(15, None)
    assert said == ["kill", "previous 15"]
    tracked._ending_on_term(tracking, env, signal.SIG_IGN)(15, None)
    assert said[2:] == ["kill"]  # killed, and the body lives on: SIGTERM was ignored before
    tracking.finishing = True  # finish has begun: it ends the run, not the handler
    tracked._ending_on_term(tracking, env, lambda signum, frame: said.append("previous"))(15, None)
    assert said[3:] == ["previous"]
    before = signal.getsignal(signal.SIGTERM)
    try:
        tracked._ending_on_term(tracking, env, signal.SIG_DFL)(15, None)
        assert said[4:] == ["died"] and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, before)


def test_an_attempt_that_goes_on_with_a_run_ended_killed_makes_it_open_again(fake_mlflow: FakeMlflow,
                                                                           tmp_path: Path) -> None:
    folder = run_folder(tmp_path)
    first = JobTracking.for_job(folder, "sqlite:////x/mlflow.db", None, {}, print)
    first.start()
    first.kill(5.0)  # a SIGTERM read as a cancel, and yet Slurm requeued the job
    assert read_tracking(folder)["closed"] is True
    JobTracking.for_job(folder, "sqlite:////x/mlflow.db", None, {}, print).start()  # the next attempt
    known = read_tracking(folder)
    assert fake_mlflow.runs["run1"].status == "RUNNING" and list(fake_mlflow.runs) == ["run1"]
    assert (known["closed"], known["verdict"], known["status"]) == (False, None, None)  # open for a sweep, for sync
    assert status_from_folder({}, known["verdict"]) is None  # track sync: still running


def a_handler(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, shown: dict[str, str], previous: Any,
              said: list[Any]) -> Any:
    """_ending_on_term's handler, Slurm saying `shown`; `said` gets what it does: asked, kill, died."""
    def show_job(job: str, timeout: float) -> dict[str, str]:
        said.append("asked")
        return shown

    monkeypatch.setattr(tracked.SlurmClient, "local", lambda env: SimpleNamespace(show_job=show_job))
    monkeypatch.setattr(tracked, "os", SimpleNamespace(getpid=lambda: 0, kill=lambda pid, signum: said.append("died")))
    monkeypatch.setattr(tracked.signal, "signal", lambda signum, handler: None)  # (the test's own SIGTERM stays)
    tracking = SimpleNamespace(finishing=False, run_dir=tmp_path, since=0.0, kill=lambda seconds: said.append("kill"))
    return tracking, tracked._ending_on_term(tracking, {"SLURM_JOB_ID": "12"}, previous)


@pytest.mark.parametrize(("previous", "done"), [(signal.SIG_DFL, ["asked", "kill", "died"]),
                                                (signal.SIG_IGN, ["asked"])], ids=["default", "ignored"])
def test_a_sigterm_while_the_job_runs_ends_the_run_killed_only_where_the_body_ends_by_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, previous: Any, done: list[str]) -> None:
    said: list[Any] = []  # `scancel --full --signal=TERM`: Slurm still says RUNNING
    _, on_term = a_handler(monkeypatch, tmp_path, {"JobState": "RUNNING", "Restarts": "0"}, previous, said)
    on_term(15, None)
    assert said == done  # the default: the body dies, and nothing else would end its run; ignored: it goes on


def test_a_second_sigterm_while_the_first_is_seen_to_does_at_once_what_it_did_before(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    said: list[Any] = []
    tracking, on_term = a_handler(monkeypatch, tmp_path, {"JobState": "COMPLETING", "Restarts": "0"},
                                  signal.SIG_DFL, said)
    def kill(seconds: float) -> None:  # a second SIGTERM meanwhile: Python runs its handler inside this one
        said.append("kill")
        if said.count("kill") == 1:
            on_term(15, None)

    tracking.kill = kill
    on_term(15, None)
    assert said[:3] == ["asked", "kill", "died"]  # the second: no second question, no second kill, the body ends
    said.clear()
    on_term(15, None)  # once the first is seen to, a later SIGTERM is seen to again
    assert said[:2] == ["asked", "kill"]


def test_the_cancel_handler_is_in_place_while_the_run_is_opened(fake_mlflow: FakeMlflow, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # start() imports MLflow and opens the store (seconds): a scancel then must find the handler, not the default.
    folder = run_folder(tmp_path)
    seen: list[Any] = []
    opened = JobTracking.start

    def start(self: JobTracking) -> dict[str, str]:
        seen.append(signal.getsignal(signal.SIGTERM))
        return opened(self)

    monkeypatch.setattr(JobTracking, "start", start)
    before = signal.getsignal(signal.SIGTERM)
    body = JobBody(folder, track="mlflow", tracking_uri="sqlite:////x/mlflow.db")
    with tracked.tracked_attempt(body, {"SLURM_JOB_ID": "12"}, None, slurm=True) as attempt:
        during = signal.getsignal(signal.SIGTERM)
        attempt.ended(0, 0)
    assert seen == [during] and during is not before and signal.getsignal(signal.SIGTERM) is before
