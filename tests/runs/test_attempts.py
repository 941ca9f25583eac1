"""A run's history of attempts, and the notes a failing rank leaves: kept across the chief's writes of state.json."""

from __future__ import annotations

from pathlib import Path

from hpc_train.runs import attempts
from hpc_train.runs.state import read_state, write_state


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
    attempts.note_failure(tmp_path / "file", "signal", "x", environ={})  # a file where the folder should be


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
