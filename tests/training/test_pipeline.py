from __future__ import annotations

import numpy as np
import pytest

from hpc_train.training.pipeline import validation_plan

pytestmark = pytest.mark.tensorflow


@pytest.mark.parametrize("images, replicas, plan", [
    (2000, 1, (500, 4)), (2000, 2, (500, 2)), (2000, 3, (333, 2)), (7, 2, (3, 1)), (997, 1, (1, 997)),
])
def test_validation_reads_each_image_once_when_shared_evenly(images: int, replicas: int,
                                                             plan: tuple[int, int]) -> None:
    assert validation_plan(images, replicas) == plan


def test_each_worker_reads_its_own_shard_in_full_batches() -> None:
    from hpc_train.training.keras import tf
    from hpc_train.training.pipeline import training_dataset_fn

    images = np.arange(20 * 28 * 28, dtype=np.uint32).astype(np.uint8).reshape(20, 28, 28)
    labels = np.arange(20, dtype=np.uint8)
    make = training_dataset_fn(images, labels, per_replica_batch=3, seed=0)
    seen = []
    for pipeline in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline)
        batches = list(make(context).take(3).as_numpy_iterator())
        assert all(batch[0].shape == (3, 28, 28, 1) and batch[0].dtype == np.float32 for batch in batches)
        assert all(0.0 <= batch[0].min() and batch[0].max() <= 1.0 for batch in batches)
        seen.append({int(label) for batch in batches for label in batch[1]})
    assert seen[0] <= set(range(0, 20, 2)) and seen[1] <= set(range(1, 20, 2))  # disjoint shards
