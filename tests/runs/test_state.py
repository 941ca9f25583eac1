"""state.json: written whole or not at all, read back, and compared across runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.runs.state import layout_changes, read_state, write_state


def test_the_state_is_written_whole_and_read_back(tmp_path: Path) -> None:
    write_state(tmp_path, "stopped", global_step=94, signal="SIGUSR1")
    state = read_state(tmp_path)
    assert (state["state"], state["global_step"], state["signal"]) == ("stopped", 94, "SIGUSR1")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["state.json"]  # no partial file left


def test_a_missing_or_damaged_state_reads_as_none(tmp_path: Path) -> None:
    assert read_state(tmp_path) == {}
    (tmp_path / "state.json").write_text('{"state": "runn')
    assert read_state(tmp_path) == {}


def test_unknown_states_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_state(tmp_path, "paused")


def test_layout_changes_name_what_differs() -> None:
    before = {"workers": 2, "per_replica_batch": 64, "seed": 0}
    assert layout_changes(before, {"workers": 4, "per_replica_batch": 64, "seed": 0}) == ["workers 2 -> 4"]
    assert layout_changes({}, {"workers": 4}) == []


def test_a_change_of_size_with_the_same_global_batch_is_no_change_of_layout() -> None:
    from hpc_train.runs.state import layout_changes

    before = {"workers": 4, "replicas": 4, "per_replica_batch": 60, "global_batch": 240, "steps_per_epoch": 10}
    now = {"workers": 3, "replicas": 3, "per_replica_batch": 80, "global_batch": 240, "steps_per_epoch": 10}
    assert layout_changes(before, now) == []
    assert layout_changes(before, {**now, "global_batch": 192, "per_replica_batch": 64}) == [
        "workers 4 -> 3", "replicas 4 -> 3", "per_replica_batch 60 -> 64", "global_batch 240 -> 192"]


def test_a_new_size_keeps_the_stopped_runs_steps_per_epoch_and_nothing_else_does() -> None:
    from hpc_train.runs.state import steps_kept_at_a_new_size

    ps = {"workers": 2, "replicas": 1, "per_replica_batch": 64, "global_batch": 64, "steps_per_epoch": 30}
    assert steps_kept_at_a_new_size(ps, 64, 1, 31) == 30  # a worker fewer: the epochs stay 30 steps long
    assert steps_kept_at_a_new_size(ps, 64, 2, 31) == 31  # the same size: the data changed, and is said so
    assert steps_kept_at_a_new_size(ps, 32, 1, 62) == 62  # another global batch: another training
    assert steps_kept_at_a_new_size({}, 64, 1, 31) == 31  # a first run


def test_the_layout_outlives_a_stop_until_the_next_run_writes_its_own(tmp_path) -> None:
    from hpc_train.runs.state import read_state, write_state

    write_state(tmp_path, "running", global_step=4, layout={"workers": 2, "global_batch": 64})
    write_state(tmp_path, "stopped", global_step=8, signal="SIGUSR1")  # what the resuming run compares with
    assert read_state(tmp_path)["layout"] == {"workers": 2, "global_batch": 64}
    write_state(tmp_path, "running", global_step=8, layout={"workers": 1, "global_batch": 64})
    assert read_state(tmp_path)["layout"] == {"workers": 1, "global_batch": 64}


def test_the_chiefs_state_keeps_each_attempts_size(tmp_path) -> None:
    from hpc_train.runs.attempts import attempt_sizes, note_size
    from hpc_train.runs.state import read_state, write_json_atomically, write_state

    write_json_atomically(tmp_path / "state.json", note_size({}, 1, 3, "2-4"))
    write_state(tmp_path, "running", global_step=0)
    assert attempt_sizes(read_state(tmp_path)) == [(1, "on 3 of 2-4 nodes")]
