"""The goodput ledger's pure core (runs/ledger.py): each category, the totals, the status line."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpc_train.runs.ledger import (CATEGORIES, Attempt, Measured, attempt_seconds, input_share, ledger, shares,
                                   status_line)

T0 = 1_800_000_000.0


def measured(first: float, **totals: float) -> Measured:
    return Measured(first_steps=T0 + first, totals=totals, last=None)


def test_a_finished_attempt_is_startup_then_its_measured_steps_then_idle_and_the_rest_other() -> None:
    attempt = Attempt(1, T0, T0 + 100, ranks_ended=T0 + 96,
                      measured=measured(10, input=18, compute=60, checkpoint=2, evaluation=3))
    seconds = attempt_seconds(attempt)
    assert seconds == {"startup": 10, "input": 18, "compute": 60, "checkpoint": 2, "evaluation": 3, "lost": 0,
                       "idle": 4, "other": pytest.approx(3)}


def test_a_failed_attempt_keeps_what_its_last_checkpoint_kept_and_the_rest_is_lost() -> None:
    kept = {"input": 1.0, "compute": 20.0, "checkpoint": 1.0, "evaluation": 0.0, "time": T0 + 35}
    attempt = Attempt(1, T0, T0 + 80, failed=True, ranks_ended=T0 + 70,
                      measured=Measured(T0 + 10, {"input": 3.0, "compute": 50.0, "checkpoint": 1.0}, kept))
    seconds = attempt_seconds(attempt)
    # From the checkpoint (35 s in) to the attempt's end (80 s): the steps thrown away and the failed end.
    assert seconds["lost"] == 45 and seconds["compute"] == 20 and seconds["input"] == 1 and seconds["idle"] == 0
    assert sum(seconds.values()) == pytest.approx(80)


def test_a_failed_attempt_without_a_checkpoint_loses_everything_after_its_start_up() -> None:
    attempt = Attempt(2, T0, T0 + 50, failed=True, measured=measured(5, compute=40))
    seconds = attempt_seconds(attempt)
    assert seconds["startup"] == 5 and seconds["lost"] == 45 and seconds["compute"] == 0


def test_an_attempt_that_never_trained_is_startup_and_then_idle_or_lost() -> None:
    assert attempt_seconds(Attempt(1, T0, T0 + 30, ranks_ended=T0 + 20))["startup"] == 20
    assert attempt_seconds(Attempt(1, T0, T0 + 30, ranks_ended=T0 + 20))["idle"] == 10
    assert attempt_seconds(Attempt(1, T0, T0 + 30, failed=True, ranks_ended=T0 + 20))["lost"] == 10


def test_measures_that_overrun_the_wall_time_shrink_to_it_and_other_is_never_negative() -> None:
    seconds = attempt_seconds(Attempt(1, T0, T0 + 10, measured=measured(2, compute=20)))
    assert sum(seconds.values()) == pytest.approx(10) and seconds["other"] == 0


@given(st.floats(1, 1e5), st.floats(0, 1), st.floats(0, 1), st.floats(0, 1), st.floats(0, 1),
       st.booleans(), st.floats(0, 1))
def test_every_attempts_categories_add_up_to_its_wall_time(wall: float, first: float, input_: float,
                                                           compute: float, kept_at: float, failed: bool,
                                                           ended_at: float) -> None:
    kept = {"compute": compute * wall * kept_at, "time": T0 + kept_at * wall}
    attempt = Attempt(1, T0, T0 + wall, failed=failed, ranks_ended=T0 + ended_at * wall,
                      measured=Measured(T0 + first * wall, {"input": input_ * wall, "compute": compute * wall}, kept))
    seconds = attempt_seconds(attempt)
    assert set(seconds) == set(CATEGORIES) and all(value >= 0 for value in seconds.values())
    assert sum(seconds.values()) == pytest.approx(wall, rel=1e-6)


def test_the_ledger_keeps_every_attempt_and_counts_queued_requeued_node_and_gpu_seconds() -> None:
    first = Attempt(1, T0 + 20, T0 + 120, nodes=2, gpus=8, failed=True, measured=measured(30, compute=50))
    second = Attempt(2, T0 + 150, T0 + 250, nodes=2, gpus=8, ranks_ended=T0 + 245,
                     measured=measured(160, compute=80))
    made = ledger([second, first], submitted=T0)
    assert [row["attempt"] for row in made["attempts"]] == [1, 2]
    assert made["queued"] == 20 and made["requeued"] == 30
    assert made["node_seconds"] == 400 and made["gpu_seconds"] == 1600
    assert made["total"]["wall"] == 200 and made["total"]["compute"] == 80
    assert made["goodput"] == 0.4 and made["total"]["lost"] == 90


def test_the_status_line_has_the_issues_form_and_adds_up() -> None:
    seconds = {"startup": 6, "input": 18, "compute": 71, "checkpoint": 2, "evaluation": 0, "lost": 0, "idle": 1,
               "other": 2}
    assert status_line(seconds) == "goodput 71%: input 18%, startup 6%, checkpoint 2%, lost 0%, idle 1%, other 2%"
    with_validation = status_line({**seconds, "evaluation": 5, "compute": 66})
    assert with_validation == ("goodput 66%: input 18%, startup 6%, checkpoint 2%, evaluation 5%, lost 0%, "
                               "idle 1%, other 2%")
    assert status_line(dict.fromkeys(CATEGORIES, 0.0)) is None
    assert sum(shares(seconds).values()) == pytest.approx(1)


def test_the_input_share_is_the_wait_over_the_steps_time() -> None:
    assert input_share(4, 6) == 0.4 and input_share(0, 0) == 0


def test_measures_read_from_a_damaged_record_are_not_measured() -> None:
    found = Measured.of({"first_steps": "soon", "totals": {"input": 2, "compute": "x"}, "kept": {"compute": 1}})
    assert found.first_steps is None and found.totals == {"input": 2.0} and found.kept is None


def test_after_training_ended_the_held_allocation_is_idle() -> None:
    attempt = Attempt(1, T0, T0 + 100, ranks_ended=T0 + 98,
                      measured=Measured(T0 + 10, {"compute": 70.0}, None, None, T0 + 85))
    seconds = attempt_seconds(attempt)
    assert seconds["idle"] == 15 and seconds["other"] == pytest.approx(5)


def test_what_was_measured_after_training_is_not_idle() -> None:
    attempt = Attempt(1, T0, T0 + 100, ranks_ended=T0 + 98,
                      measured=Measured(T0 + 10, {"compute": 70.0, "checkpoint": 2.0, "evaluation": 3.0}, None, None,
                                        T0 + 85, after=5.0))
    seconds = attempt_seconds(attempt)
    assert seconds["idle"] == 10 and seconds["other"] == pytest.approx(5)


def test_a_packs_slots_without_a_trial_are_idle_node_seconds() -> None:
    from hpc_train.runs.ledger import idle_slots

    # Slot 0 (one node) ran two trials back to back with a 10 s gap; slot 1 (two nodes) one trial for half the time.
    slots = [(1, [(0.0, 40.0), (50.0, 100.0)]), (2, [(0.0, 50.0)])]
    assert idle_slots(slots, 0.0, 100.0) == 10 + 2 * 50
    assert idle_slots([(1, [(-10.0, 200.0)])], 0.0, 100.0) == 0  # a run beyond the span counts within it
