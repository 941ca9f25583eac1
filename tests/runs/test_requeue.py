"""Requeueing: when a stopped job may requeue itself, and asking a real (or fake) scontrol."""

from __future__ import annotations

import json

from pathlib import Path

import pytest

from hpc_train.runs.requeue import plan_requeue, requeue
from tests.fake_slurm import FakeSlurm, Reply


@pytest.mark.parametrize("environ, max_requeues, job_id, reason", [
    ({"SLURM_JOB_ID": "42"}, 5, "42", "requeue 1 of at most 5"),
    ({"SLURM_JOB_ID": "42", "SLURM_RESTART_COUNT": "4"}, 5, "42", "requeue 5 of at most 5"),
    ({"SLURM_JOB_ID": "42", "SLURM_RESTART_COUNT": "5"}, 5, None,
     "job 42 has been requeued 5 time(s), max_requeues is 5: resubmit it to resume, or raise max_requeues"),
    ({"SLURM_JOB_ID": "42"}, 0, None, "max_requeues is 0: resubmit the job to resume"),
    ({}, 5, None, "not a Slurm job: run the same command again to resume"),
])
def test_a_job_requeues_itself_a_bounded_number_of_times(environ: dict[str, str], max_requeues: int,
                                                         job_id: str | None, reason: str) -> None:
    plan = plan_requeue(environ, max_requeues)
    assert (plan.job_id, plan.reason) == (job_id, reason)


def fake_scontrol(tmp_path: Path, reply: Reply, monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    """scontrol on this process's PATH (requeue asks Slurm with the job's own environment)."""
    fake = FakeSlurm(tmp_path / "fake", {"scontrol": reply})
    monkeypatch.setenv("PATH", fake.install(tmp_path / "bin")["PATH"])
    return fake


def test_requeue_asks_scontrol_for_this_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_scontrol(tmp_path, Reply(), monkeypatch)
    assert requeue("42") is None
    assert fake.lines() == ["scontrol requeue 42"]


def test_a_refused_requeue_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_scontrol(tmp_path, Reply(stderr="scontrol: error: Requested operation is presently disabled\n", code=1),
                  monkeypatch)
    assert requeue("42") == "scontrol: error: Requested operation is presently disabled"


def test_without_scontrol_there_is_no_requeue(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert requeue("42") == "scontrol not found"


def test_the_restart_count_is_slurms_or_0() -> None:
    from hpc_train.runs.requeue import restart_count

    assert [restart_count(env) for env in ({}, {"SLURM_RESTART_COUNT": "3"}, {"SLURM_RESTART_COUNT": "x"})] == [0, 3, 0]


def test_a_stopped_run_requeues_its_job_and_records_it_in_its_history(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from hpc_train.runs.requeue import requeue_stopped
    from hpc_train.runs import attempts

    fake = fake_scontrol(tmp_path, Reply(), monkeypatch)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    before: list[str] = []
    outcome = requeue_stopped({"SLURM_JOB_ID": "42", "SLURM_RESTART_COUNT": "2"}, 5, run_dir, 120,
                              lambda asking: before.extend([asking.asking(), *fake.lines()]))
    assert outcome.requeued and outcome.says() == "requeued job 42 (requeue 1 of at most 5)"
    # What the rank says of it, it says before Slurm is asked (whose yes ends the rank).
    assert before == ["requeueing job 42 (requeue 1 of at most 5)"] and fake.lines() == ["scontrol requeue 42"]
    [entry] = attempts.history(run_dir)
    assert (entry["action"], entry["attempt"], entry["checkpoint_step"]) == ("requeued", 3, 120)
    # The history counts the requeues, not SLURM_RESTART_COUNT: the next one is the second.
    assert requeue_stopped({"SLURM_JOB_ID": "42"}, 5, run_dir).says() == "requeued job 42 (requeue 2 of at most 5)"


def test_the_history_holds_the_requeue_when_slurm_is_asked_for_the_job_body_woken_by_its_yes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Slurm's yes sends the job body SIGTERM at once, and the body reads the history then (injob/onterm.py): the
    requeue must be there already, not written once scontrol has returned (a loaded machine let the body win)."""
    from hpc_train.runs import attempts, requeue

    seen: list[list[str]] = []

    def slurm_agrees(job_id: str) -> None:  # (None: Slurm's yes)
        seen.append([entry["action"] for entry in attempts.history(tmp_path)])

    monkeypatch.setattr(requeue, "requeue", slurm_agrees)
    assert requeue.requeue_stopped({"SLURM_JOB_ID": "42"}, 5, tmp_path, 10).requeued
    assert seen == [["requeued"]] and attempts.requeues_done(attempts.history(tmp_path)) == 1


def test_without_a_run_folder_every_restart_counts_and_nothing_is_recorded(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from hpc_train.runs.requeue import requeue_stopped

    fake = fake_scontrol(tmp_path, Reply(), monkeypatch)
    before: list[object] = []
    outcome = requeue_stopped({"SLURM_JOB_ID": "42", "SLURM_RESTART_COUNT": "2"}, 2, None, before=before.append)
    assert not outcome.requeued and outcome.problem is None and before == []
    assert outcome.says() == ("not requeued: job 42 has been requeued 2 time(s), max_requeues is 2: resubmit it to "
                              "resume, or raise max_requeues")
    assert fake.lines() == []


def test_a_requeue_slurm_refuses_says_so_and_records_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hpc_train.runs.requeue import requeue_stopped
    from hpc_train.runs import attempts

    fake_scontrol(tmp_path, Reply(stderr="scontrol: error: disabled\n", code=1), monkeypatch)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    earlier = attempts.requeue_entry(1, 5)
    attempts.record(run_dir, earlier)
    state_file = run_dir / "state.json"
    state_file.write_text(json.dumps({**json.loads(state_file.read_text()), "state": "stopped"}))
    before: list[str] = []
    outcome = requeue_stopped({"SLURM_JOB_ID": "42"}, 5, run_dir, 10, lambda asking: before.append(asking.job_id))
    assert not outcome.requeued and before == ["42"]
    assert outcome.says() == "scontrol requeue 42 failed (scontrol: error: disabled)"
    assert attempts.history(run_dir) == [earlier]  # recorded on asking, taken back: the earlier one kept
    assert json.loads(state_file.read_text())["state"] == "stopped"  # and the rest of the file


def test_a_rank_in_an_image_asks_the_job_body_which_requeues_the_job_outside(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """In an image there is no scontrol: the chief's request goes through the run folder, and the body (outside,
    once the step has ended) asks Slurm; the run's history has the requeue either way."""
    from hpc_train.injob.body import JobBody, requeued_for_a_rank
    from hpc_train.runs.requeue import requeue_stopped
    from hpc_train.runs import attempts

    fake = fake_scontrol(tmp_path, Reply(), monkeypatch)
    outcome = requeue_stopped({"SLURM_JOB_ID": "42", "HPC_TRAIN_CONTAINER": "charliecloud"}, 5, tmp_path)
    assert outcome.requeued and outcome.says() == "requeued job 42 (requeue 1 of at most 5)"
    assert not fake.calls("scontrol") and attempts.requeues_done(attempts.history(tmp_path)) == 1
    body = JobBody(tmp_path)
    monkeypatch.setattr("signal.signal", lambda signum, handler: None)  # (this test process keeps its SIGTERM)
    assert requeued_for_a_rank(body, 0) == 0 and [call.args for call in fake.calls("scontrol")] == [["requeue", "42"]]
    assert requeued_for_a_rank(body, 75) == 75 and len(fake.calls("scontrol")) == 1  # asked once: done once


def test_a_requeue_slurm_refuses_for_a_rank_in_an_image_leaves_the_step_s_code(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from hpc_train.injob.body import JobBody, requeued_for_a_rank
    from hpc_train.runs.requeue import ask_the_body

    from hpc_train.runs import attempts, requeue

    fake_scontrol(tmp_path, Reply(stderr="scontrol: error: Requested operation is presently disabled", code=1),
                  monkeypatch)
    earlier = attempts.requeue_entry(2)
    attempts.record(tmp_path, earlier)
    # The rank recorded its requeue on asking the body (requeue_stopped); Slurm then refuses the body.
    assert requeue.requeue_stopped({"SLURM_JOB_ID": "42", "HPC_TRAIN_CONTAINER": "charliecloud"}, 5, tmp_path).requeued
    assert ask_the_body(tmp_path, "42") is None
    monkeypatch.setattr("signal.signal", lambda signum, handler: None)
    assert requeued_for_a_rank(JobBody(tmp_path), 75) == 75
    assert "hpc-train: scontrol requeue 42 failed (" in capsys.readouterr().err
    assert attempts.history(tmp_path) == [earlier]  # the refused one taken back, the earlier one kept
