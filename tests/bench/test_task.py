"""`hpc-train bench task`: ratios paired by round, the checkpoint share, the goals' verdicts, and one real run each."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.bench import task
from hpc_train.bench.task import BASELINE, PLAIN_DEFAULTS, TIMED, TRAINER, Contestant, Run


def steady(rate: float, epochs: int = 3, seconds: float = 2.0, save: float | None = None) -> Run:
    """A run whose first epoch is slow (tracing) and the others run at `rate`; saves of `save` s if timed."""
    saves = [] if save is None else [0.5, *[save] * (epochs - 1)]
    return Run([rate / 3, *[rate] * (epochs - 1)], [3 * seconds, *[seconds] * (epochs - 1)], saves)


def test_a_runs_figures_leave_out_the_first_epoch_and_its_save() -> None:
    # Saved after epochs 1, 3 and 4 (the trainer skips some short epochs' ends); epoch times leave saves out.
    run = Run([100.0, 1000.0, 1200.0, 900.0], [9.0, 2.0, 2.0, 2.0], [0.5, 0.04, 0.04])
    assert run.steady_rate == 1000.0
    assert run.steady_save_share == pytest.approx(0.08 / 6.0)  # the later saves against the later epochs


def test_counting_the_saves_in_gives_the_rate_a_user_sees() -> None:
    run = Run([10.0, 1000.0], [5.0, 2.0], [1.0, 0.5])  # 2,000 examples in 2 s, and a 0.5 s save
    assert run.rate_with_saves == pytest.approx(2000 / 2.5)


def test_measure_alternates_the_order_and_keeps_every_run() -> None:
    order: list[str] = []

    def fake(contestant: Contestant, epochs: int, steps: int) -> Run:
        order.append(contestant.program)
        return steady(1000.0 * len(order), epochs)

    runs = task.measure([BASELINE, TRAINER], 2, 3, 64, run=fake)
    assert order == ["plain", "train", "train", "plain"]
    assert [run.steady_rate for run in runs[BASELINE]] == [1000.0, 4000.0]
    assert [run.steady_rate for run in runs[TRAINER]] == [2000.0, 3000.0]


def fake_runs(trainer_rates: list[float], save: float, timed_rate: float = 1100.0) -> dict[str, list[Run]]:
    return {BASELINE: [steady(1000.0), steady(2000.0), steady(1000.0)],
            PLAIN_DEFAULTS: [steady(900.0)] * 3,
            TRAINER: [steady(rate) for rate in trainer_rates],
            TIMED: [steady(timed_rate, save=save)] * 3}


def test_the_report_pairs_ratios_by_round_and_says_whether_each_goal_is_met() -> None:
    text = task.render(fake_runs([1100.0, 2400.0, 1300.0], save=0.04), 3, task.STEPS_PER_EPOCH)
    # Ratios per round (1.1, 1.2, 1.3), not a ratio of medians (1,300 / 1,000).
    assert f"| {TRAINER} | 1,300 | 1,100-2,400 | 1.20 | 1.10-1.30 |" in text
    assert f"| {BASELINE} | 1,000 | 1,000-2,000 | 1.00 | 1.00-1.00 |" in text
    # Judged with the saves counted in: 4,400 examples in 4.08 s against 1,000/s (rounds 1 and 3); 0.08 s of
    # saving against 4 s of training.
    assert "**1.08x, met**" in text and "**2.0%, met**" in text
    assert "| checkpoint save, ms | 40.0 | 40.0-40.0 |" in text
    assert "| first save (epoch 1, traces the save), ms | 500.0 | 500.0-500.0 |" in text
    assert "3% of an epoch of 1.3 s" in text and "one pass over the data" in text
    assert "`hpc-train bench task`" in text and "benchmarks/task_throughput.png" in text


def test_a_missed_goal_is_reported_as_missed() -> None:
    runs = fake_runs([900.0, 1800.0, 950.0], save=0.1, timed_rate=900.0)
    text = task.render(runs, 3, 64)
    assert "**0.86x, missed**" in text and "**5.0%, missed**" in text
    assert "one pass over the data" not in text  # a shortened epoch is not the task's own
    assert task.verdicts(runs) == (pytest.approx(3600 / 4.2 / 1000), pytest.approx(0.05))


@pytest.mark.tensorflow
def test_one_short_run_of_the_plain_script_and_of_the_timed_trainer() -> None:
    plain = task.one_run(task.CONTESTANTS[BASELINE], 2, 4)
    assert len(plain.rates) == 2 and all(rate > 0 for rate in plain.rates) and plain.save_seconds == []
    timed = task.one_run(task.CONTESTANTS[TIMED], 2, 4)
    assert len(timed.rates) == 2 and len(timed.save_seconds) == 2  # the first and the last epoch always saved
    # Four steps an epoch train in milliseconds while a save takes a tenth of a second or more on a loaded
    # machine: the share is whatever the later saves took against the later epochs, not a bound.
    later_saves, later_epochs = sum(timed.save_seconds[1:]), sum(timed.training_seconds[1:])
    assert later_saves > 0 and later_epochs > 0
    assert timed.steady_save_share == pytest.approx(later_saves / later_epochs)


@pytest.mark.tensorflow
def test_the_task_module_is_a_users_module_the_trainer_accepts() -> None:
    from hpc_train.training.usertask import load_task

    loaded = load_task(str(Path(task.__file__).with_name("bench_task.py")))
    assert loaded.has("build_model") and loaded.has("train_dataset") and not loaded.has("validation_dataset")
