"""A run's history of attempts, and the notes a failing rank leaves: kept across the chief's writes of state.json."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hpc_train.runs import attempts
from hpc_train.runs.attempts import close_unended, earlier_seconds, last_tasks, note_tasks, unended
from hpc_train.runs.state import read_state, write_json_atomically, write_state

RETRIED = {"action": "retried", "attempt": 1, "cause": "node2 task 1: Killed", "after": "node2 task 1 was killed"}


def test_notes_are_read_by_rank_and_cleared(tmp_path: Path) -> None:
    attempts.note_failure(tmp_path, "lost_peer", "lost contact", ("node2",), {"SLURM_PROCID": "1",
                                                                               "SLURMD_NODENAME": "node1"}, lost="x")
    attempts.note_failure(tmp_path, "signal", "killed", (), {"SLURM_PROCID": "0", "SLURMD_NODENAME": "node3"})
    notes = attempts.read_notes(tmp_path)
    assert [(note["rank"], note["node"], note["kind"]) for note in notes] == [(0, "node3", "signal"),
                                                                            (1, "node1", "lost_peer")]
    attempts.clear_notes(tmp_path)
    assert attempts.read_notes(tmp_path) == []


def test_a_note_that_cannot_be_written_is_no_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    # A file where the folder should be: no error raised, nothing written, no note to read.
    assert attempts.note_failure(tmp_path / "file", "signal", "x", environ={}) is None
    assert (tmp_path / "file").read_text() == "" and attempts.read_notes(tmp_path / "file") == []


def test_the_history_outlives_the_chiefs_states(tmp_path: Path) -> None:
    attempts.record(tmp_path, {"action": "retried", "cause": "node2 task 1: Killed"})
    write_state(tmp_path, "running", global_step=5)
    attempts.record(tmp_path, attempts.requeue_entry(2, 40))
    write_state(tmp_path, "finished")
    history = attempts.history(tmp_path)
    assert read_state(tmp_path)["state"] == "finished" and len(history) == 2
    assert attempts.retries_used(history) == 1 and attempts.requeues_done(history) == 1
    attempts.update_last(tmp_path, seconds_lost=12.5)
    assert attempts.history(tmp_path)[-1]["seconds_lost"] == 12.5


def test_each_attempt_reads_as_one_line() -> None:
    retried = {"action": "retried", "cause": "node2 task 1: Killed", "after": "node2 task 1 was killed",
               "excluded": ["node2"], "checkpoint_step": 1240, "steps_redone": 37}
    assert attempts.describe(retried, 1, 4) == ("attempt 2 of 4: retried after node2 task 1 was killed; node2 "
                                                 "excluded; resumed at step 1,240 (37 steps redone)")
    failed = {"action": "failed", "cause": "node2 task 1: Killed", "why": "retries exhausted (3 of 3)"}
    assert attempts.describe(failed, 4, 4) == "attempt 4 of 4 failed: node2 task 1: Killed; retries exhausted (3 of 3)"


def test_time_limit_requeues_add_attempts_retries_do_not() -> None:
    history = [{"action": "requeued"}, {"action": "retried"}, {"action": "restarted"}, {"action": "failed"}]
    assert attempts.attempts_allowed(history, 3) == 1 + 3 + 2
    assert [entry["action"] for entry in attempts.failures(history)] == ["retried", "failed"]


def test_a_retried_run_training_again_counts_what_its_failure_cost(tmp_path: Path) -> None:
    import time

    from hpc_train.runs.attempts import count_failure_cost, history, record

    record(tmp_path, {"attempt": 2, "action": "retried", "cause": "node2 task 1: Killed",
                      "checkpoint_time": time.time() - 30})
    cost = count_failure_cost(tmp_path)
    [entry] = history(tmp_path)
    assert cost["count"] == 1 and 29 <= cost["seconds_lost"] == entry["seconds_lost"] < 60
    assert count_failure_cost(tmp_path) == cost  # counted once: a later epoch does not add to it


def test_each_attempts_end_is_recorded_and_outlives_the_chiefs_states(tmp_path: Path) -> None:
    attempts.record(tmp_path, RETRIED)
    attempts.record_end(tmp_path, 1, "n[1-2]", 1000.0, 0, goes_on=True)  # retried: the job goes on
    write_state(tmp_path, "running", global_step=5)  # the next attempt's chief
    attempts.record_end(tmp_path, 2, "n[3-4]", 2000.0, 0, goes_on=False)
    state = read_state(tmp_path)
    assert state["state"] == "running" and state["attempts"] == [RETRIED]
    assert [(end["attempt"], end["nodes"], end["started"], end["exit"], end["goes_on"])
            for end in attempts.ended_attempts(state)] == [(1, "n[1-2]", 1000.0, 0, True), (2, "n[3-4]", 2000.0, 0, False)]
    assert all(end["ended"] >= end["started"] for end in attempts.ended_attempts(state))


def test_an_attempts_end_is_recorded_once_a_sigterm_after_the_bodys_own_end_leaves_it(tmp_path: Path) -> None:
    attempts.record_end(tmp_path, 1, "n1", 1000.0, 0, goes_on=False, finished=True)  # the body's own end
    attempts.record_end(tmp_path, 1, "n1", 1000.0, 143, goes_on=False, signal_number=15)  # then Slurm's SIGTERM
    [end] = attempts.ended_attempts(read_state(tmp_path))
    assert (end["exit"], "signal" in end) == (0, False)


def test_a_users_command_that_succeeded_has_finished_a_trainers_own_state_stands(tmp_path: Path) -> None:
    attempts.record_end(tmp_path / "command", 1, "n1", 1000.0, 0, goes_on=False, finished=True)
    assert read_state(tmp_path / "command")["state"] == "finished"
    write_state(tmp_path / "pruned", "pruned", epoch=2)
    attempts.record_end(tmp_path / "pruned", 1, "n1", 1000.0, 0, goes_on=False, finished=True)
    assert read_state(tmp_path / "pruned")["state"] == "pruned"
    attempts.record_end(tmp_path / "trainer", 1, "n1", 1000.0, 0, goes_on=False)
    assert "state" not in read_state(tmp_path / "trainer")


def test_a_record_that_cannot_be_written_is_no_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    # A folder that is a file: no error raised, nothing written, no end to read.
    assert attempts.record_end(tmp_path / "file", 1, "n1", 1000.0, 1, goes_on=False) is None
    assert (tmp_path / "file").read_text() == "" and attempts.ended_attempts(read_state(tmp_path / "file")) == []


def ended(attempt: int, nodes: str, started: float, seconds: float, code: int, goes_on: bool = False) -> dict:
    return {"attempt": attempt, "nodes": nodes, "started": started, "ended": started + seconds, "exit": code,
            "goes_on": goes_on}


def test_how_a_job_ended_its_time_and_nodes_come_from_its_attempts() -> None:
    retried = {"attempts": [RETRIED], "attempt": {"number": 2, "nodes": "n[3-4]", "started": 2000.0},
               "ended": [ended(1, "n[1-2]", 1000.0, 30, 0, goes_on=True), ended(2, "n[3-4]", 2000.0, 35.5, 0)]}
    assert attempts.how_it_ended(retried) == ("COMPLETED", "0")
    assert attempts.seconds_run(retried) == 65.5 and attempts.last_nodes(retried) == "n[3-4]"
    assert attempts.current_attempt(retried) == 2
    failed = {"attempts": [{**RETRIED, "action": "failed"}], "ended": [ended(1, "n1", 1000.0, 5, 3)]}
    assert attempts.how_it_ended(failed) == ("FAILED", "3")
    assert attempts.how_it_ended({"ended": [ended(1, "n1", 1000.0, 5, 0, goes_on=True)]}) == ("REQUEUED", "0")
    # A folder from before the body recorded ends: the trainer's finished, from the attempt's start to then.
    old = {"state": "finished", "time": 1065.0, "attempt": {"number": 1, "nodes": "pnode[1-2]", "started": 1000.0}}
    assert attempts.how_it_ended(old) == ("COMPLETED", "0")
    assert (attempts.seconds_run(old), attempts.last_nodes(old), attempts.current_attempt(old)) == (65.0,
                                                                                                   "pnode[1-2]", 1)
    # A newer attempt started and its end was never recorded (its body killed): the folder does not know.
    lost = {"state": "running", "attempt": {"number": 2, "nodes": "n2", "started": 2000.0},
            "ended": [ended(1, "n1", 1000.0, 10, 0, goes_on=True)]}
    assert attempts.how_it_ended(lost) is None and attempts.last_nodes(lost) == "n2"
    assert attempts.seconds_run(lost) == 10.0
    assert attempts.how_it_ended({}) is None and attempts.seconds_run({}) is None and attempts.last_nodes({}) == ""


def test_each_attempt_of_a_range_keeps_its_size() -> None:
    from hpc_train.runs.attempts import attempt_sizes, note_size

    state = {"attempt": {"number": 1}, **note_size({}, 1, 4, "2-4")}
    state = {**state, **note_size(state, 2, 3, "2-4")}
    state = {**state, **note_size(state, 2, 2, "2-4")}  # the same attempt's prologue again: its newest word
    assert attempt_sizes(state) == [(1, "on 4 of 2-4 nodes"), (2, "on 2 of 2-4 nodes")]
    assert attempt_sizes({"attempt": {"number": 1, "nodes": "n1"}}) == []  # a fixed size: nothing to say


def test_an_attempt_whose_body_was_killed_with_it_is_closed_by_the_next_at_its_last_sign_of_life(
        tmp_path: Path) -> None:
    """Issue 46: `scontrol requeue` ends the body with its job: the next attempt records the end it could not,
    when the run folder was last written, so that state.json keeps every attempt (nodes, tasks, times)."""
    begun = time.time() - 100
    write_json_atomically(tmp_path / "state.json", {"state": "running", "time": begun + 1,
                                                    "attempt": {"number": 1, "nodes": "pa[1-4]", "started": begun}})
    note_tasks(tmp_path, "4")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "rank-0.out").write_text("epoch 3\n")
    last = (tmp_path / "logs" / "rank-0.out").stat().st_mtime
    close_unended(tmp_path)
    [entry] = read_state(tmp_path)["ended"]
    assert entry == {"attempt": 1, "nodes": "pa[1-4]", "tasks": "4", "started": begun, "ended": round(last, 3),
                     "exit": None, "goes_on": True}
    close_unended(tmp_path)  # recorded: nothing more
    assert len(read_state(tmp_path)["ended"]) == 1
    state = {**read_state(tmp_path), "attempt": {"number": 2, "nodes": "pa[3-4]", "tasks": "2", "started": last}}
    assert unended({"ended": [entry], "attempt": state["attempt"]}, last + 5)["ended"] == round(last + 5, 3)
    assert unended({}, 0.0) is None and last_tasks(state) == "2"
    assert earlier_seconds(state) == pytest.approx(last - begun, abs=0.01)  # the newest attempt's is Slurm's
