"""`hpc-train bench trainer`: the ceiling beside the trainer, the trainer's share of it, and one real ceiling run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hpc_train.bench import trainer
from hpc_train.bench.trainer import CEILING, CONTESTANTS, DEFAULTS, Contestant
from tests.mnist_data import shared_mnist


def test_the_ceiling_alternates_with_the_trainer_and_the_share_is_the_ratio_of_medians() -> None:
    calls: list[str] = []

    def fake(contestant: Contestant, data_dir: Path, epochs: int) -> list[float]:
        calls.append(contestant.program)
        steady = 1000.0 if contestant.program == "ceiling" else 900.0 + 10 * len(calls)
        return [100.0, steady, steady]  # the first epoch (tracing) is left out

    samples = trainer.measure(Path("data"), 3, 3, run=fake, names=(DEFAULTS, CEILING))
    assert calls == ["train", "ceiling", "ceiling", "train", "train", "ceiling"]
    assert samples == {DEFAULTS: [910.0, 940.0, 950.0], CEILING: [1000.0] * 3}
    assert trainer.ceiling_share(samples) == pytest.approx(0.94)
    section = trainer.render_ceiling(samples, 3, (2.5, 3.0))
    assert "| ceiling | 1,000 | 1,000-1,000 | 100% |" in section
    assert f"| {DEFAULTS} | 940 | 910-950 | 94% |" in section
    assert "(goal: at least 90%): 94%, its median images/s over the ceiling's (per round: 91%-95%)" in section
    assert "load average 2.5 at the start, 3.0 at the end" in section


def test_the_full_table_has_a_ceiling_row_next_to_the_trainer() -> None:
    assert list(CONTESTANTS).index(CEILING) == list(CONTESTANTS).index(DEFAULTS) + 1  # side by side each round
    samples = {name: [1000.0, 1000.0] for name in CONTESTANTS} | {CEILING: [1250.0, 1250.0]}
    section = trainer.render(samples, 3)
    assert "| ceiling | 1,250 | 1,250-1,250 | 1.25 | 1.25-1.25 |" in section
    assert "The trainer's share of the ceiling (goal: at least 90%): 80%" in section


@pytest.mark.parametrize("trained, code", [(950.0, 0), (850.0, 1)])
def test_ceiling_only_exits_by_the_goal_and_writes_its_own_section(
        trained: float, code: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    measured: list[tuple[str, ...]] = []
    written: list[str] = []

    def fake_measure(data_dir: Path, rounds: int, epochs: int, names: tuple[str, ...] = ()) -> dict:
        measured.append(names)
        return {DEFAULTS: [trained] * rounds, CEILING: [1000.0] * rounds}

    monkeypatch.setattr(trainer, "measure", fake_measure)
    monkeypatch.setattr(trainer, "publish", lambda name, section, write, *plots: written.append(name))
    assert trainer.main(["--ceiling-only", "--rounds", "2"]) == code
    assert measured == [(DEFAULTS, CEILING)] and written == ["trainer_ceiling"]


@pytest.mark.tensorflow
def test_the_ceiling_trains_the_trainers_model_on_one_batch_and_prints_each_epochs_rate() -> None:
    result = subprocess.run([sys.executable, "-m", "hpc_train.bench.ceiling", str(shared_mnist()), "2",
                             "steps_per_epoch=8", "steps_per_execution=4"], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(printed["images_per_second"]) == 2 and all(rate > 0 for rate in printed["images_per_second"])
    # 8 steps of the global batch (64) an epoch: the rate is those images over the epoch's seconds
    assert printed["images_per_second"][1] == pytest.approx(8 * 64 / printed["seconds"][1])
