"""`hpc-train bench precision`: both runs of a round share its seed, the order alternates, and the verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.bench import precision
from hpc_train.bench.precision import AUTO, FLOAT32, Run
from hpc_train.bench.trainer import Contestant

pytestmark = pytest.mark.quick


def test_each_round_runs_both_with_its_seed_in_alternating_order(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[tuple[str, ...], int]] = []

    def fake(contestant: Contestant, data_dir: Path, epochs: int, seed: int) -> Run:
        calls.append((contestant.options, seed))
        fast = not contestant.options
        return Run(1500.0 if fast else 1000.0, 0.97 - 0.001 * seed, "mixed_bfloat16 (auto: the CPU has AMX)")

    samples = precision.measure(Path("data"), 3, 5, run=fake)
    assert calls == [(("precision=float32",), 0), ((), 0), ((), 1), (("precision=float32",), 1),
                     (("precision=float32",), 2), ((), 2)]
    assert [run.images_per_second for run in samples[AUTO]] == [1500.0] * 3
    section = precision.render(samples, 5)
    assert f"| {AUTO} | mixed_bfloat16 (auto: the CPU has AMX) | 1,500 | 1,500-1,500 | 1.50 | 1.50-1.50 | 0.9690 |" \
        in section
    assert "auto's accuracy minus float32's: +0.00 points (goal: within 0.3)." in section


def test_the_accuracy_gap_is_in_points_of_the_means() -> None:
    samples = {FLOAT32: [Run(1.0, 0.970, ""), Run(1.0, 0.972, "")], AUTO: [Run(1.0, 0.965, ""), Run(1.0, 0.969, "")]}
    assert precision.accuracy_gap(samples) == pytest.approx(-0.4)


def test_too_few_rounds_or_epochs_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        precision.main(["--epochs", "1"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "hpc-train bench precision: error: --rounds must be 1 or more and --epochs 2 or more (got 5 and 1)")
