"""Progress in steps: what is left to train after a checkpoint, and where the data resumes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpc_train.training.progress import Progress, Stretch, data_position, remaining_stretches


@pytest.mark.parametrize("step, text", [
    (0, "after epoch 0 (step 0)"), (124, "after epoch 2 (step 124)"),
    (94, "in epoch 2 after step 32 of 62 (step 94)"),
])
def test_a_position_reads_as_epochs_and_steps(step: int, text: str) -> None:
    assert Progress(step, 62).describe() == text


@pytest.mark.parametrize("step, stretches", [
    (0, [Stretch(0, 3, 62, 0)]),                          # a fresh run: one fit over every epoch
    (62, [Stretch(1, 3, 62, 62)]),                        # after a whole epoch
    (94, [Stretch(1, 2, 30, 94), Stretch(2, 3, 62, 124)]),  # mid-epoch: the rest of it, then whole epochs
    (180, [Stretch(2, 3, 6, 180)]),                       # mid-way through the last epoch
    (186, []), (300, []),                                 # done (or done with more epochs than asked now)
])
def test_what_is_left_after_a_checkpoint(step: int, stretches: list[Stretch]) -> None:
    assert remaining_stretches(Progress(step, 62), epochs=3) == stretches


@given(steps_per_epoch=st.integers(1, 500), epochs=st.integers(1, 20), data=st.data())
def test_the_stretches_train_each_remaining_step_once_in_order(steps_per_epoch: int, epochs: int,
                                                              data: st.DataObject) -> None:
    done = data.draw(st.integers(0, steps_per_epoch * epochs))
    stretches = remaining_stretches(Progress(done, steps_per_epoch), epochs)
    step, epoch = done, done // steps_per_epoch
    for stretch in stretches:
        assert (stretch.start_step, stretch.first_epoch) == (step, epoch)  # contiguous, nothing skipped
        step += stretch.steps * (stretch.end_epoch - stretch.first_epoch)
        epoch = stretch.end_epoch
    assert step == steps_per_epoch * epochs and (epoch == epochs or not stretches)


def test_data_resumes_in_the_right_pass_and_batch() -> None:
    assert data_position(0, 62) == (0, 0)
    assert data_position(94, 62) == (1, 32)
    with pytest.raises(ValueError):
        data_position(3, 0)


def test_impossible_positions_are_refused() -> None:
    for step, steps_per_epoch in ((-1, 10), (5, 0)):
        with pytest.raises(ValueError):
            Progress(step, steps_per_epoch)


def test_the_position_state_json_records_is_the_step_and_the_epoch_it_falls_in() -> None:
    assert Progress(70, 30).position() == {"global_step": 70, "epochs_done": 2, "step_in_epoch": 10,
                                           "steps_per_epoch": 30}


def test_a_global_batch_is_shared_by_the_replicas_of_every_size() -> None:
    from hpc_train.config import ConfigError, TrainConfig
    from hpc_train.training.progress import replica_batch

    config = TrainConfig(batch_size=64, global_batch=240)
    assert [replica_batch(config, replicas).batch_size for replicas in (2, 3, 4)] == [120, 80, 60]
    assert replica_batch(TrainConfig(batch_size=64), 3).batch_size == 64  # none: batch_size per replica, as today
    with pytest.raises(ConfigError, match="global_batch 240 cannot be shared by 7 replicas"):
        replica_batch(config, 7)
