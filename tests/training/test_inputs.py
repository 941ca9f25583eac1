"""A task's datasets as the trainer feeds them: checks, epoch length, and exact resume by skipping."""

from __future__ import annotations

import numpy as np
import pytest

from hpc_train.config import TrainConfig
from hpc_train.training.usertask import TaskError, from_functions, load_task
from tests.training.tasks import REGRESSION

pytestmark = pytest.mark.tensorflow


def task(train_dataset, **more):  # type: ignore[no-untyped-def]
    return from_functions("task t.py", build_model=lambda: None, train_dataset=train_dataset, **more)


def labels(dataset, count: int) -> list[list[float]]:  # type: ignore[no-untyped-def]
    return [batch[1].ravel().tolist() for batch in dataset.take(count).as_numpy_iterator()]


def test_a_resumed_stream_is_the_uninterrupted_one_from_the_next_batch() -> None:
    """Skipping keeps every later pass's order: the seeded shuffle reshuffles each pass the same way."""
    from hpc_train.training.inputs import Pipelines, training_fn

    from tests.training.tasks import regression

    config = TrainConfig(batch_size=32)
    user = load_task(str(REGRESSION))
    context = Pipelines(2, 2).contexts()[1]
    per_pass = regression.EXAMPLES // 2 // 32
    whole = labels(training_fn(user, config, 0)(context), 3 * per_pass)
    assert whole[:per_pass] != whole[per_pass:2 * per_pass]  # a new order each pass
    for done in (1, per_pass, per_pass + 5):
        assert labels(training_fn(user, config, done)(context), 6) == whole[done:done + 6]


def test_an_epoch_is_the_fewest_batches_any_pipeline_has() -> None:
    from hpc_train.training.inputs import Pipelines, epoch_steps
    from hpc_train.training.keras import tf

    def uneven(context, batch_size):  # type: ignore[no-untyped-def]
        return tf.data.Dataset.range(10 + context.input_pipeline_id * 5).map(lambda i: (i, i)).batch(
            batch_size, drop_remainder=True)

    assert epoch_steps(task(uneven), TrainConfig(batch_size=2), Pipelines(3, 3)) == 5
    assert epoch_steps(task(uneven), TrainConfig(batch_size=2), Pipelines(1, 2)) == 2  # 2 replicas per pipeline
    assert epoch_steps(task(uneven), TrainConfig(batch_size=2), Pipelines(3, 1, take_turns=True)) == 15
    assert epoch_steps(task(uneven), TrainConfig(batch_size=2, steps_per_epoch=7), Pipelines(3, 3)) == 7


def test_an_endless_dataset_needs_steps_per_epoch() -> None:
    from hpc_train.training.inputs import Pipelines, epoch_steps
    from hpc_train.training.keras import tf

    def endless(context, batch_size):  # type: ignore[no-untyped-def]
        return tf.data.Dataset.range(8).map(lambda i: (i, i)).batch(batch_size).repeat()

    with pytest.raises(TaskError, match=r"task t\.py: train_dataset\(input_context, batch_size\) is endless or of "
                                        r"unknown length .*: set steps_per_epoch \(--set steps_per_epoch=N\)"):
        epoch_steps(task(endless), TrainConfig(batch_size=2), Pipelines(1, 1))


@pytest.mark.parametrize("make, message", [
    (lambda tf: [1, 2, 3], r"returned a list, not a tf\.data\.Dataset"),
    (lambda tf: tf.data.Dataset.range(4).batch(2), r"yields single TensorSpecs; expected \(features, labels\) or \(features, labels, sample_weights\)"),
    (lambda tf: tf.data.Dataset.from_tensor_slices((np.zeros((8, 3)), np.zeros(8))),
     r"yields single values, not batches; batch the dataset with \.batch\(batch_size\)"),
    (lambda tf: tf.data.Dataset.from_tensor_slices((np.zeros((8, 3)), np.zeros(8))).batch(3, drop_remainder=True),
     r"yields batches of 3, but batch_size is 4 per replica"),
])
def test_a_dataset_that_cannot_be_trained_on_is_refused_naming_the_function(make, message: str) -> None:  # type: ignore[no-untyped-def]
    from hpc_train.training.inputs import Pipelines, epoch_steps
    from hpc_train.training.keras import tf

    with pytest.raises(TaskError, match=r"task t\.py: train_dataset\(input_context, batch_size\) " + "(.*)" + message):
        epoch_steps(task(lambda context, batch_size: make(tf)), TrainConfig(batch_size=4), Pipelines(1, 1))


def test_features_the_model_cannot_take_are_refused() -> None:
    from hpc_train.training.inputs import check_model_fits
    from hpc_train.training.keras import tf

    from tests.training.tasks import regression

    model = regression.build_model()
    wide = tf.data.Dataset.from_tensor_slices((np.zeros((8, 5), "float32"), np.zeros(8))).batch(4)
    with pytest.raises(TaskError, match=r"yields features of shape \(None, 5\), but the model from build_model\(\) "
                                        r"takes \(None, 8\)"):
        check_model_fits(task(lambda c, b: wide), model, wide)
    fitting = tf.data.Dataset.from_tensor_slices((np.zeros((8, 8), "float32"), np.zeros(8))).batch(4)
    check_model_fits(task(lambda c, b: fitting), model, fitting)
