"""Input pipelines that keep the model busy, and whose position is a number that a checkpoint can hold.

Training reads a stream of passes over the images. Pass p is a permutation of
every image, fixed by (seed, p); each input pipeline (one per worker) takes
its own interleaved share of it, in whole batches. Where a pipeline is after
b batches is therefore pure arithmetic (`progress.data_position`), so a
resumed run continues with exactly the batch that was next, without saving
any iterator state, and without reading the batches before it. Images stay uint8 in memory and are normalised a batch at
a time, after the gather.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hpc_train.training.keras import tf
from hpc_train.training.progress import data_position

AUTOTUNE = tf.data.AUTOTUNE
DatasetFn = Callable[["tf.distribute.InputContext | None"], tf.data.Dataset]


def training_dataset_fn(images: np.ndarray, labels: np.ndarray, per_replica_batch: int, seed: int,
                        batches_done: int = 0, endless: bool = True) -> DatasetFn:
    """A dataset function: each input pipeline reads its own share, after the `batches_done` it had read.

    `endless=False` gives one pass alone (finite, its length known), to count an epoch's batches.
    """

    def make(context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        pipelines = context.num_input_pipelines if context else 1
        pipeline = context.input_pipeline_id if context else 0
        share = len(images) // pipelines
        batches_per_pass = share // per_replica_batch
        if batches_per_pass < 1:
            raise ValueError(f"{len(images)} training images cannot give {pipelines} input pipeline(s) a batch of "
                             f"{per_replica_batch} each; use more images or a smaller batch_size")
        first_pass, skip = data_position(batches_done, batches_per_pass)
        all_images, all_labels = tf.constant(images), tf.constant(labels)

        def batches_of_pass(pass_number: tf.Tensor) -> tf.data.Dataset:
            order = tf.random.experimental.stateless_shuffle(
                tf.range(len(images), dtype=tf.int64), seed=tf.stack([tf.constant(seed, tf.int64), pass_number]))
            mine = order[pipeline:share * pipelines:pipelines][:batches_per_pass * per_replica_batch]
            return tf.data.Dataset.from_tensor_slices(tf.reshape(mine, (batches_per_pass, per_replica_batch)))

        def gather(indices: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            return _normalise(tf.gather(all_images, indices)), tf.gather(all_labels, indices)

        if not endless:
            return batches_of_pass(tf.constant(0, tf.int64)).map(gather, num_parallel_calls=AUTOTUNE)
        return (tf.data.Dataset.range(first_pass, np.iinfo(np.int64).max)
                .flat_map(batches_of_pass)
                .skip(skip)
                .map(gather, num_parallel_calls=AUTOTUNE)
                .prefetch(AUTOTUNE)
                # Said out loud: with a stream of unknown length, MultiWorkerMirrored would check with every
                # worker before each step whether some ran out of data (a cross-worker all-reduce per step).
                .apply(tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY)))

    return make


def validation_dataset_fn(images: np.ndarray, labels: np.ndarray, per_replica_batch: int) -> DatasetFn:
    """Validation images in order, sharded like training, once (the trainer repeats them), kept in memory."""

    def make(context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        dataset = _shard(tf.data.Dataset.from_tensor_slices((images, labels)), context)
        return (dataset.batch(per_replica_batch, drop_remainder=True).map(_normalise_pair, num_parallel_calls=AUTOTUNE)
                .cache())

    return make


def _shard(dataset: tf.data.Dataset, context: tf.distribute.InputContext | None) -> tf.data.Dataset:
    if context is None or context.num_input_pipelines == 1:
        return dataset
    return dataset.shard(context.num_input_pipelines, context.input_pipeline_id)


def _normalise(images: tf.Tensor) -> tf.Tensor:
    """uint8 (..., 28, 28) to float32 (..., 28, 28, 1) in [0, 1]."""
    return tf.expand_dims(tf.cast(images, tf.float32) / 255.0, -1)


def _normalise_pair(images: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return _normalise(images), labels


def validation_plan(images: int, replicas: int, largest_batch: int = 500) -> tuple[int, int]:
    """(per-replica batch, steps) that read each validation image once when replicas share them evenly."""
    per_replica = images // replicas
    batch = max(size for size in range(1, min(per_replica, largest_batch) + 1) if per_replica % size == 0)
    return batch, per_replica // batch
