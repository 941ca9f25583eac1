"""A packed sweep's files: its trials' states in Slurm's words, and the allocation's timeline."""

from __future__ import annotations

from pathlib import Path

from hpc_train.injob.pack.core import PackState, as_json, ended, slots_of, starts
from hpc_train.runs.packed import draw_timeline, slurm_states, timeline_bars


def a_pack() -> dict:
    state, _ = starts(PackState.new(slots_of(["node1", "node2"], 1, 1), 3, None, 1), 100.0)
    state, _ = starts(ended(state, 0, 0, 110.0), 110.0)
    state = ended(state, 1, 2, 115.0, gpus="1")  # crashed: waits to be retried
    return as_json(state)


def test_trials_read_as_slurm_says_array_elements() -> None:
    assert slurm_states(a_pack(), 3) == {0: "COMPLETED", 1: "PENDING", 2: "RUNNING"}
    assert slurm_states({}, 2) == {0: "PENDING", 1: "PENDING"}


def test_the_timeline_has_a_bar_per_attempt_on_its_share() -> None:
    bars = timeline_bars(a_pack(), now=120.0)
    assert sorted(bars) == [(0, 0.0, 10.0, "0", "done"), (0, 10.0, 10.0, "2", "running"),
                            (1, 0.0, 15.0, "1 (GPU 1)", "crashed")]


def test_the_timeline_is_drawn(tmp_path: Path) -> None:
    path = tmp_path / "timeline.png"
    assert draw_timeline(a_pack(), path, 120.0) and path.read_bytes()[:4] == b"\x89PNG"
    assert not draw_timeline({}, tmp_path / "none.png", 120.0)
