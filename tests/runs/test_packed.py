"""A packed sweep's files: its trials' states in Slurm's words, and the allocation's timeline."""

from __future__ import annotations

from pathlib import Path

from hpc_train.injob.pack.core import PackState, as_json, ended, slots_of, starts
from hpc_train.runs.packed import (draw_timeline, given_back_bars, held_nodes, released_lines, slurm_states,
                                   timeline_bars)


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


def test_status_shows_each_trial_where_it_runs_and_on_which_gpus() -> None:
    from hpc_train.runs.folders import JobRecord
    from hpc_train.runs.views import RunFiles, packed_lines

    record = JobRecord("9", "sw", "runs/sw-9", 2, 4, "multiworker", 0.0, sweep="9",
                       elements=[{"seed": 1}, {"seed": 2}, {"seed": 3}], pack={"trial_gpus": 1})
    lines = packed_lines(record, [RunFiles()] * 3, a_pack(), {2: "node2 1"})
    assert lines[0] == "packed sweep 9 (sw): 3 trials: 1 done, 1 waiting, 1 running"
    rows = {line.split()[0]: line.split() for line in lines[2:5]}
    assert rows["0"][2:4] == ["done", "node1"] and rows["1"][2:4] == ["waiting", "node2"]
    assert rows["2"][2:6] == ["running", "node1", "(GPUs", "1)"]
    assert "hpc-train cancel 9_INDEX ends one trial" in lines[-1]
    assert not any(line.strip().startswith("lost:") for line in lines)
    assert "  nodes:   node1 (1 running), node2 (0 running) (held by the job)" in lines  # what the job holds
    lost = packed_lines(record, [RunFiles()] * 3, {**a_pack(), "lost": ["node2"]}, {})
    assert "  lost:    node2 (their trials restarted on the shares left)" in lost


def test_a_packs_report_names_the_timeline_it_wrote_beside_sweep_csv_and_png(tmp_path: Path) -> None:
    """(issue 46, 5) `report` of a pack named sweep.csv and sweep.png but not the pack-timeline.png it wrote."""
    import json

    from hpc_train.runs.folders import JobRecord
    from tests.login.test_submission import hpc_train, mock_slurm

    runs = tmp_path / "runs"
    values = [{"learning_rate": rate} for rate in (0.1, 0.01, 0.001)]
    pack = JobRecord("4242", "p", str(runs / "p-4242"), 2, 2, "multiworker", 0.0, None, sweep="4242",
                     elements=values, pack={"gpus": 1})
    pack.write()
    (runs / "p-4242" / "pack-state.json").write_text(json.dumps(a_pack()))
    for index, value in enumerate(values):
        element = JobRecord(f"4242_{index}", "p", str(runs / f"p-4242_{index}"), 1, 1, "multiworker", 0.0, None,
                            sweep="4242", pack={"gpus": 1})
        element.write()
        (runs / f"p-4242_{index}" / "metrics.json").write_text(json.dumps({"epochs": [
            {"epoch": 1, "val_accuracy": 0.5 + index / 10, "val_loss": 0.5}]}))
    report = hpc_train("report", "4242", cwd=tmp_path, fake=mock_slurm(tmp_path / "fake"))
    assert report.returncode == 0, report.stderr
    folder = runs / "p-4242"
    assert f"wrote {folder / 'sweep.csv'}, {folder / 'sweep.png'} and {folder / 'pack-timeline.png'}" in \
        report.stdout.splitlines(), report.stdout
    assert (runs / "p-4242" / "pack-timeline.png").read_bytes()[:4] == b"\x89PNG"


def test_a_node_given_back_is_said_held_no_more_and_drawn_from_when_it_went(tmp_path: Path) -> None:
    import time

    from hpc_train.injob.pack.core import nodes_released

    state, _ = starts(PackState.new(slots_of(["pk1", "pk2"], 1, 2), 4, None, 0), 100.0)  # 0,2 on pk1; 1,3 on pk2
    state = ended(ended(ended(state, 1, 0, 105.0), 3, 0, 108.0), 0, 0, 109.0)
    went = time.mktime((2026, 11, 27, 12, 3, 41, 0, 0, -1))
    pack = as_json(nodes_released(state, ["pk2"], went))
    assert released_lines(pack) == ["released pk2 at 12:03:41, 2 trials done there"]
    assert held_nodes(pack) == {"pk1": 1}
    late = as_json(nodes_released(state, ["pk2"], 110.0))
    assert given_back_bars(late, 30.0) == [(2, 10.0, 20.0), (3, 10.0, 20.0)]  # pk2's two shares, from 10 s on
    assert given_back_bars(a_pack(), 30.0) == []
    assert draw_timeline(late, tmp_path / "timeline.png", 130.0)
