"""Epoch-end checkpoints within a share of the training time: which epochs are saved (a fake clock)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.tensorflow


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def saved_epochs(epoch_seconds: float, save_seconds: float, share: float, epochs: int = 10,
                 agree=lambda wanted: wanted) -> list[int]:  # type: ignore[no-untyped-def]
    from hpc_train.training.callbacks import EpochCheckpoint

    clock, saved = Clock(), []

    def save() -> str:
        saved.append(epoch)
        clock.now += save_seconds
        return "ckpt"

    callback = EpochCheckpoint(save, epochs, share, agree, clock)
    for epoch in range(epochs):
        clock.now += epoch_seconds
        callback.on_epoch_end(epoch)
    return [epoch + 1 for epoch in saved]


def test_long_epochs_are_each_saved() -> None:
    assert saved_epochs(epoch_seconds=60, save_seconds=0.05, share=0.03) == list(range(1, 11))


def test_short_epochs_are_saved_so_that_saves_take_at_most_the_share() -> None:
    # A 0.3 s save is due again after 10 s: every 4th epoch of 3 s, the first and the last always.
    assert saved_epochs(epoch_seconds=3, save_seconds=0.3, share=0.03) == [1, 5, 9, 10]
    saves = len(saved_epochs(epoch_seconds=1, save_seconds=0.04, share=0.03, epochs=100))
    assert saves * 0.04 <= 0.03 * 100 * 1 + 0.04 * 2  # within the share, give or take the first and last


def test_share_zero_saves_every_epoch_and_any_task_wanting_a_save_makes_all_save() -> None:
    assert saved_epochs(epoch_seconds=1, save_seconds=0.5, share=0.0) == list(range(1, 11))
    assert saved_epochs(epoch_seconds=1, save_seconds=0.5, share=0.03, agree=lambda wanted: True) == list(range(1, 11))


def test_timed_saves_are_as_often_as_asked_or_as_the_share_allows_within_1_to_15_minutes() -> None:
    from hpc_train.training.checkpoints import save_interval

    assert save_interval(0.5, 0.03, 2.0) == 30  # checkpoint_minutes set: exactly that
    assert save_interval(0, 0.03, 2.0) == float("inf")  # 0: epoch ends only
    assert save_interval(None, 0.03, None) == 60  # no save measured yet
    assert save_interval(None, 0.03, 0.05) == 60  # a cheap save: at most once a minute
    assert save_interval(None, 0.03, 6.0) == pytest.approx(200)  # 6 s / 3%
    assert save_interval(None, 0.03, 60.0) == 900  # never more than 15 minutes apart


def test_a_timed_save_is_made_at_a_step_boundary_by_every_rank_and_training_goes_on() -> None:
    from hpc_train.training.callbacks import StopAtStepBoundary

    saves, agreed = [], []

    def agree(kind, save):  # type: ignore[no-untyped-def]
        agreed.append((kind, save))
        return kind, save or len(agreed) == 1  # mid-epoch, another rank found a save due
    callback = StopAtStepBoundary(lambda: None, agree, lambda: saves.append(1) or "ckpt", 3, save_due=lambda: False)
    callback.params = {"steps": 62}
    callback.on_train_batch_end(31)  # mid-epoch: saved, not stopped
    callback.on_epoch_end(0)  # the epoch's own save is EpochCheckpoint's: not asked for here
    assert len(saves) == 1 and agreed == [(None, False), (None, False)]
