"""The run folder's ledger (runs/goodput.py): the body's and the ranks' measures into ledger.json, through
failures, requeues and a sweep's elements; the status line."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hpc_train.runs import goodput
from hpc_train.runs.attempts import record, record_end
from hpc_train.runs.ledger import CATEGORIES
from hpc_train.runs.state import STATE_FILE

T0 = 1_800_000_000.0


def attempt(run_dir: Path, number: int, started: float, ended: float | None, first: float, compute: float,
            kept_at: float | None = None, exit_code: int = 0, goes_on: bool = False) -> None:
    """One attempt's records, as the body and the chief leave them."""
    goodput.note_body(run_dir, number, started=T0 + started, nodes=2, gpus=4,
                      **({"ranks_ended": T0 + ended - 1} if ended is not None else {}))
    kept = {"compute": compute / 2, "time": T0 + kept_at} if kept_at is not None else None
    goodput.note_ranks(run_dir, number, {"first_steps": T0 + first, "totals": {"compute": compute, "input": 1.0},
                                         **({"kept": kept} if kept else {})})
    if ended is not None:
        state = json.loads((run_dir / STATE_FILE).read_text()) if (run_dir / STATE_FILE).exists() else {}
        entry = {"attempt": number, "nodes": "n[1-2]", "started": T0 + started, "ended": T0 + ended,
                 "exit": exit_code, "goes_on": goes_on}
        (run_dir / STATE_FILE).write_text(json.dumps({**state, "ended": [*state.get("ended", []), entry]}))


def test_a_retried_job_keeps_both_attempts_its_failure_lost_and_the_gap_requeued(tmp_path: Path) -> None:
    (tmp_path / "job.json").write_text(json.dumps({"submitted": T0 - 30}))
    attempt(tmp_path, 1, 0, 100, first=10, compute=80, kept_at=50, goes_on=True)
    record(tmp_path, {"attempt": 1, "action": "retried", "cause": "node2 task 1: Killed"})
    attempt(tmp_path, 2, 160, 260, first=170, compute=85)
    made = goodput.write_ledger(tmp_path)
    assert made == goodput.read_ledger(tmp_path)
    first, second = made["attempts"]
    assert first["lost"] == 50 and first["compute"] == 40  # from its checkpoint (50 s in) to its end
    assert second["lost"] == 0 and second["compute"] == 85 and second["idle"] == 1
    assert made["queued"] == 30 and made["requeued"] == 60
    assert made["node_seconds"] == 400 and made["gpu_seconds"] == 800
    for row in made["attempts"]:
        assert sum(row[name] for name in CATEGORIES) == pytest.approx(row["wall"])


def test_a_requeued_attempt_whose_end_was_not_recorded_ends_at_its_bodys_last_word(tmp_path: Path) -> None:
    attempt(tmp_path, 1, 0, None, first=10, compute=50)
    goodput.note_body(tmp_path, 1, ranks_ended=T0 + 70, ended=T0 + 71)  # its SIGTERM's note (ledgered.py)
    attempt(tmp_path, 2, 100, 200, first=110, compute=80)
    first, second = goodput.make_ledger(tmp_path, now=T0 + 1000)["attempts"]
    assert first["wall"] == 71 and not first.get("running") and second["wall"] == 100


def test_a_running_attempt_counts_until_now(tmp_path: Path) -> None:
    attempt(tmp_path, 1, 0, None, first=10, compute=20)
    [row] = goodput.make_ledger(tmp_path, now=T0 + 40)["attempts"]
    assert row["running"] and row["wall"] == 40 and row["startup"] == 10 and row["compute"] == 20


def test_status_sums_a_sweeps_elements_into_one_line(tmp_path: Path) -> None:
    elements = [tmp_path / "a", tmp_path / "b"]
    for index, folder in enumerate(elements):
        attempt(folder, 1, 0, 100, first=10, compute=70 + 10 * index)
    [line] = goodput.status_lines(elements)
    assert line == "  goodput 75%: input 1%, startup 10%, checkpoint 0%, lost 0%, idle 1%, other 13%"
    assert goodput.status_lines([tmp_path / "none"]) == []


def test_an_attempt_in_state_json_from_the_body_alone_still_counts(tmp_path: Path) -> None:
    record_end(tmp_path, 1, "n1", time.time() - 50, 0, False)  # no measures: the ledger was off, or an old job
    [row] = goodput.make_ledger(tmp_path)["attempts"]
    assert row["attempt"] == 1 and row["wall"] >= 50 and row["startup"] == row["wall"]


@pytest.mark.parametrize("value, on", [("0", False), ("off", False), ("no", False), ("1", True), ("", True)])
def test_hpc_train_ledger_turns_it_off(value: str, on: bool) -> None:
    assert goodput.ledger_on({goodput.SETTING: value}) is on and goodput.ledger_on({})


def test_the_final_save_and_evaluation_are_added_and_training_ends_after_them(tmp_path: Path) -> None:
    env = {"SLURM_RESTART_COUNT": "1"}
    goodput.add_to_measures(tmp_path, env, checkpoint=1.0)  # never measured: nothing written
    assert not goodput.ranks_path(tmp_path, 2).exists()
    goodput.note_ranks(tmp_path, 2, {"first_steps": T0, "totals": {"checkpoint": 0.5, "compute": 9.0}, "trained": T0})
    goodput.add_to_measures(tmp_path, env, checkpoint=1.0, evaluation=2.0)
    record = json.loads(goodput.ranks_path(tmp_path, 2).read_text())
    assert record["totals"] == {"checkpoint": 1.5, "compute": 9.0, "evaluation": 2.0}
    assert record["trained"] == T0 and record["after"] == 3.0  # out of the idle time after training


def test_status_of_a_packed_sweep_counts_its_slots_without_a_trial_as_idle(tmp_path: Path) -> None:
    from hpc_train.runs.folders import JobRecord, element_folders
    from hpc_train.runs.packed import STATE as PACK_STATE

    record = JobRecord("9", "s", str(tmp_path / "runs" / "s-9"), 2, 2, "multiworker", T0, sweep="9",
                       elements=[{}, {}], pack={"nodes": 1})
    trial = element_folders(record)[0]
    attempt(trial, 1, 0, 100, first=0, compute=98)  # one node, 100 s: compute, and the other node had no trial
    pack = {"slots": [{"index": 0, "nodes": ["n1"]}, {"index": 1, "nodes": ["n2"]}],
            "trials": [{"index": 0, "runs": [{"slot": 0, "started": T0, "ended": T0 + 100}]}]}
    (tmp_path / "runs" / "s-9").mkdir()
    (tmp_path / "runs" / "s-9" / PACK_STATE).write_text(json.dumps(pack))
    [line] = goodput.record_lines(record)
    # Per node: trial 0's 2 nodes x 100 s (as its attempt records them) and slot 1's node idle 100 s.
    assert line.startswith("  goodput 65%: ") and "idle 34%" in line, line


def test_a_node_the_pack_gave_back_is_idle_no_more_from_then_on() -> None:
    pack = {"slots": [{"index": 0, "nodes": ["n1"]}, {"index": 1, "nodes": ["n2"]}],
            "trials": [{"index": 0, "runs": [{"slot": 0, "started": T0, "ended": T0 + 100}]},
                       {"index": 1, "runs": [{"slot": 1, "started": T0, "ended": T0 + 20}]}]}
    assert goodput.pack_idle(pack, T0 + 100) == 80.0  # n2 held, empty, for its last 80 s
    assert goodput.pack_idle({**pack, "released": [{"node": "n2", "at": T0 + 30, "done": 1}]}, T0 + 100) == 10.0
