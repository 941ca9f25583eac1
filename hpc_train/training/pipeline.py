"""Input pipelines that keep the model busy: shard, normalise once, cache, shuffle, repeat, batch, prefetch."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hpc_train.training.keras import tf

AUTOTUNE = tf.data.AUTOTUNE
DatasetFn = Callable[["tf.distribute.InputContext | None"], tf.data.Dataset]


def training_dataset_fn(images: np.ndarray, labels: np.ndarray, per_replica_batch: int, seed: int) -> DatasetFn:
    """A dataset function: each input pipeline (one per worker) reads its own shard."""

    def make(context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        dataset = _shard(tf.data.Dataset.from_tensor_slices((images, labels)), context)
        return (dataset.map(_normalise, num_parallel_calls=AUTOTUNE)
                .cache()  # decoded once, then every epoch reads memory
                .shuffle(len(images), seed=seed, reshuffle_each_iteration=True)
                .repeat()
                .batch(per_replica_batch, drop_remainder=True)  # every replica steps with equal batches
                .prefetch(AUTOTUNE))

    return make


def validation_dataset_fn(images: np.ndarray, labels: np.ndarray, per_replica_batch: int) -> DatasetFn:
    """Validation images in order, sharded like training, repeated so a fixed step count always finds data."""

    def make(context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        dataset = _shard(tf.data.Dataset.from_tensor_slices((images, labels)), context)
        return (dataset.map(_normalise, num_parallel_calls=AUTOTUNE).cache().repeat()
                .batch(per_replica_batch, drop_remainder=True).prefetch(AUTOTUNE))

    return make


def _shard(dataset: tf.data.Dataset, context: tf.distribute.InputContext | None) -> tf.data.Dataset:
    if context is None or context.num_input_pipelines == 1:
        return dataset
    return dataset.shard(context.num_input_pipelines, context.input_pipeline_id)


def _normalise(image: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return tf.expand_dims(tf.cast(image, tf.float32) / 255.0, -1), label


def validation_plan(images: int, replicas: int, largest_batch: int = 500) -> tuple[int, int]:
    """(per-replica batch, steps) that read each validation image once when replicas share them evenly."""
    per_replica = images // replicas
    batch = max(size for size in range(1, min(per_replica, largest_batch) + 1) if per_replica % size == 0)
    return batch, per_replica // batch
