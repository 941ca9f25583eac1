"""The built-in task, and the default `task`: MNIST digits with the seeds' CNN (or the deeper one).

The whole task is in this folder: `data` (reading and verifying MNIST, NumPy
only), `fetch` (staging it), `model` and `pipeline` (TensorFlow). It is a task
module like any user's (hpc_train/training/usertask.py), with two things a
user's may also do: its functions take the run's `config` (model,
optimizer, data_dir, train_images, validation_images, seed), and its
`train_dataset` seeks by itself (`skip_batches`): each pass over the images is
a permutation fixed by the seed and the pass number, so a resumed run starts
at the very batch that was next without reading the ones before it.
"""

from __future__ import annotations

import functools
from typing import Any

from hpc_train.errors import HpcTrainError
from hpc_train.tasks.mnist.data import MnistSplits, load_mnist

# TensorFlow is imported inside the functions: `hpc_train.tasks.mnist.data` and `.fetch` (reading and staging
# MNIST, `hpc-train data fetch`) must import on a login node without it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from hpc_train.training.keras import keras, tf


def build_model(config: Any) -> keras.Model:
    from hpc_train.tasks.mnist.model import build_model as build_mnist_model
    from hpc_train.tasks.mnist.model import compile_model

    model = build_mnist_model(config.model)
    compile_model(model, config.optimizer, config.learning_rate, steps_per_execution=1)  # the trainer sets it
    return model


def train_dataset(input_context: tf.distribute.InputContext, batch_size: int, config: Any,
                  skip_batches: int | None = None) -> tf.data.Dataset:
    """This pipeline's share of every pass; one pass when `skip_batches` is None, else the endless stream."""
    from hpc_train.tasks.mnist.pipeline import training_dataset_fn

    splits = _splits(config)
    pipelines = input_context.num_input_pipelines
    if len(splits.train_images) // pipelines < batch_size:
        raise HpcTrainError(f"{len(splits.train_images)} training images cannot give {pipelines} worker(s) a batch "
                            f"of {batch_size} each; use more train_images or a smaller batch_size")
    make = training_dataset_fn(splits.train_images, splits.train_labels, batch_size, config.seed,
                               batches_done=skip_batches or 0, endless=skip_batches is not None)
    return make(input_context)


def validation_dataset(input_context: tf.distribute.InputContext, batch_size: int, config: Any) -> tf.data.Dataset:
    """The validation images, each read once per evaluation, in batches that divide them evenly."""
    from hpc_train.tasks.mnist.pipeline import validation_dataset_fn, validation_plan

    splits = _splits(config)
    batch, _ = validation_plan(len(splits.validation_images), input_context.num_replicas_in_sync)
    return validation_dataset_fn(splits.validation_images, splits.validation_labels, batch)(input_context)


def final_metrics(model: keras.Model, config: Any) -> dict[str, float]:
    """Accuracy on every validation image once, on this process alone, whatever the strategy."""
    from hpc_train.training.keras import tf

    splits = _splits(config)  # `model` is the trainer's copy outside the strategy: predict on this process alone
    images = tf.expand_dims(tf.cast(splits.validation_images, tf.float32) / 255.0, -1)
    predictions = tf.argmax(model.predict(images, batch_size=500, verbose=0), axis=1)
    correct = tf.cast(predictions == tf.cast(splits.validation_labels, tf.int64), tf.float32)
    return {"final_val_accuracy": float(tf.reduce_mean(correct))}


def describe(config: Any) -> str:
    splits = _splits(config)
    return (f"MNIST from {splits.source}: {len(splits.train_images)} training, {len(splits.validation_images)} "
            "validation images")


def summary(config: Any) -> dict[str, Any]:
    splits = _splits(config)
    return {"train_images": len(splits.train_images), "validation_images": len(splits.validation_images),
            "data": splits.source}


def _splits(config: Any) -> MnistSplits:
    return _load(config.data_dir, config.train_images, config.validation_images)


@functools.lru_cache(maxsize=2)
def _load(data_dir: str | None, train_images: int | None, validation_images: int) -> MnistSplits:
    """Read and verify the files once per process, however often the functions above are called."""
    return load_mnist(data_dir, train_images, validation_images)
