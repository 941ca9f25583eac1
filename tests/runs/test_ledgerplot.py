"""report's picture of the ledger (runs/ledgerplot.py): a bar per attempt, per trial with the sweep's total."""

from __future__ import annotations

from pathlib import Path

from hpc_train.runs import goodput, ledgerplot
from hpc_train.runs.attempts import record
from hpc_train.runs.ledger import CATEGORIES

T0 = 1_700_000_000.0


def measured_attempt(folder: Path, number: int, started: float, compute: float) -> None:
    goodput.note_body(folder, number, started=T0 + started, ranks_ended=T0 + started + compute + 10, ended=T0 +
                      started + compute + 10)
    goodput.note_ranks(folder, number, {"first_steps": T0 + started + 5, "totals": {"compute": compute}})


def test_a_job_has_a_bar_per_attempt_and_their_total(tmp_path: Path) -> None:
    measured_attempt(tmp_path, 1, 0, 40)
    record(tmp_path, {"attempt": 1, "action": "retried"})
    measured_attempt(tmp_path, 2, 100, 80)
    drawn = ledgerplot.bars([tmp_path], sweep=False)
    assert [label for label, _ in drawn] == ["attempt 1", "attempt 2", "total"]
    assert drawn[0][1]["lost"] == 45 and drawn[2][1]["compute"] == 80
    assert ledgerplot.plot([tmp_path], False, tmp_path / "ledger.png")
    assert (tmp_path / "ledger.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_sweep_or_a_pack_has_a_bar_per_trial_and_the_sweeps_total(tmp_path: Path) -> None:
    trials = [tmp_path / "s_0", tmp_path / "s_1", tmp_path / "s_2"]
    measured_attempt(trials[0], 1, 0, 30)
    measured_attempt(trials[2], 1, 0, 50)  # trial 1 never started: no bar
    drawn = ledgerplot.bars(trials, sweep=True)
    assert [label for label, _ in drawn] == ["trial 0", "trial 2", "sweep (node-s)"]
    assert drawn[-1][1]["compute"] == 80 and set(CATEGORIES) <= set(drawn[-1][1])
    # A pack: its slot 1 held no trial for the 70 s slot 0 ran one: idle in the sweep's total.
    pack = {"slots": [{"index": 0, "nodes": ["n1"]}, {"index": 1, "nodes": ["n2"]}],
            "trials": [{"index": 0, "runs": [{"slot": 0, "started": T0, "ended": T0 + 70}]}]}
    assert ledgerplot.bars(trials, True, pack, now=T0 + 100)[-1][1]["idle"] == drawn[-1][1]["idle"] + 70
    line = ledgerplot.report_line(tmp_path, trials, True)
    assert line == f"wrote {tmp_path / 'ledger.png'} (the goodput ledger: where the allocation's time went)"
    assert ledgerplot.report_line(tmp_path, [tmp_path / "none"], False) is None
