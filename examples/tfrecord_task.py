"""Sharded file input at scale: TFRecord shards, each worker reading its own files.

    hpc-train train --task examples/tfrecord_task.py --set epochs=3
    hpc-train submit --nodes 4 --task examples/tfrecord_task.py

The shards ($TFRECORD_EXAMPLE_SHARDS of them, default 8) are written once,
reproducibly, into $TFRECORD_EXAMPLE_DIR (default runs/tfrecord-example-data);
several workers starting at once write the same bytes to temporary names of
their own and rename them, so none reads half a file. Each input pipeline reads
whole files of its own (what `AutoShardPolicy.FILE` does), so no worker reads
records it then drops. With fewer files than pipelines some worker would get
none: that is refused, naming both counts and the fix. Record datasets do not
know their length; this one asserts it, from the shards it wrote (otherwise
hpc-train needs `steps_per_epoch`).
"""

import os
import tempfile
from pathlib import Path

import numpy as np
import tensorflow as tf
import tf_keras as keras

RECORDS_PER_SHARD, FEATURES, CLASSES = 512, 16, 3


def data_dir() -> Path:
    return Path(os.environ.get("TFRECORD_EXAMPLE_DIR", "runs/tfrecord-example-data"))


def shard_count() -> int:
    return int(os.environ.get("TFRECORD_EXAMPLE_SHARDS", "8"))


def write_shards(folder: Path, shards: int = 8) -> list[str]:
    """The shard files, written once: the same bytes from every worker, each renamed into place whole."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for shard in range(shards):
        path = folder / f"train-{shard:05d}-of-{shards:05d}.tfrecord"
        if not path.exists():
            # A name no other writer has (workers may share a file system and a pid): rename is atomic.
            handle, partial = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.")
            os.close(handle)
            with tf.io.TFRecordWriter(partial) as writer:
                for features, label in zip(*_records(shard)):
                    writer.write(_example(features, label))
            os.replace(partial, path)
        paths.append(str(path))
    return paths


def _records(shard: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(shard)
    features = rng.normal(size=(RECORDS_PER_SHARD, FEATURES)).astype("float32")
    labels = np.argmax(features[:, :CLASSES] + features[:, CLASSES:2 * CLASSES], axis=1)
    return features, labels


def _example(features: np.ndarray, label: int) -> bytes:
    feature = {"x": tf.train.Feature(float_list=tf.train.FloatList(value=features)),
               "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)]))}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _parse(record):
    parsed = tf.io.parse_single_example(record, {"x": tf.io.FixedLenFeature([FEATURES], tf.float32),
                                                  "y": tf.io.FixedLenFeature([], tf.int64)})
    return parsed["x"], parsed["y"]


def files_of(files: list[str], input_context) -> list[str]:
    """This pipeline's whole files: every n-th, so that the pipelines' files are disjoint and cover them all."""
    pipelines = input_context.num_input_pipelines
    if len(files) < pipelines:
        raise ValueError(f"{len(files)} TFRecord files for {pipelines} workers: some worker would read nothing; "
                         f"write at least {pipelines} shards (one per worker or more: here "
                         f"TFRECORD_EXAMPLE_SHARDS={pipelines}), or use fewer workers")
    return files[input_context.input_pipeline_id::pipelines]


def build_model():
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(CLASSES)])
    model.compile(optimizer=keras.optimizers.legacy.Adam(0.003),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def train_dataset(input_context, batch_size):
    mine = files_of(write_shards(data_dir(), shard_count()), input_context)
    batches = len(mine) * RECORDS_PER_SHARD // batch_size
    options = tf.data.Options()
    # Sharded by hand, by file, above: TensorFlow must not shard it again.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return (tf.data.TFRecordDataset(mine).map(_parse, num_parallel_calls=tf.data.AUTOTUNE)
            .shuffle(4096, seed=1).batch(batch_size, drop_remainder=True)
            .apply(tf.data.experimental.assert_cardinality(batches)).with_options(options))
