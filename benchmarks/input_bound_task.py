"""An input-bound task module: MNIST upscaled, with heavy per-example augmentation and a small, fast model.

    hpc-train train --task benchmarks/input_bound_task.py --set data_dir=DIR --set epochs=3
    hpc-train submit --task benchmarks/input_bound_task.py --set data_dir=DIR --data-workers 1

What benchmarks/data_service_input_bound.py trains with the tf.data service and without it. Each training image
(uint8, 28x28) is, one example at a time: upscaled to 64x64, cropped at random to 56x56, turned by a small random
angle, given random brightness and contrast, blurred INPUT_BOUND_WORK times (a 5x5 Gaussian; default 6) and given
Gaussian noise, then cast back to uint8 (as a decoded JPEG would be: the batches that cross the network stay small).
No flips: a mirrored digit is another digit (or none), and the comparison's accuracy must mean something. The
randomness is stateless, seeded by the example's index, so each call returns the same batches in the same order
(the trainer's exact resume). The model normalises and trains on 56x56 images: three strided convolutions and a
dense layer, cheap beside the augmentation, so that a rank that makes its own input on its own core waits on it.

Validation images are upscaled, centre-cropped and blurred alike, once (cached): validation stays on the ranks.
The data: `--set data_dir=DIR` (the built-in task's setting, or HPC_TRAIN_DATA_DIR): the MNIST test set's first
8,000 images train, its last 2,000 validate where the training images are missing (as on the machines here).
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import tensorflow as tf
import tf_keras as keras

from hpc_train.tasks.mnist.data import load_mnist

SIZE, CROP = 64, 56
MAX_ANGLE = math.radians(12)
SEED = 47
VALIDATION_IMAGES = 2000


def work() -> int:
    """Blur passes per example (INPUT_BOUND_WORK): the knob that makes the input heavier or lighter."""
    return max(0, int(os.environ.get("INPUT_BOUND_WORK", "6")))


def _splits(config: Any):
    return load_mnist(getattr(config, "data_dir", None), None, VALIDATION_IMAGES)


def _kernel() -> tf.Tensor:
    taps = tf.constant([1.0, 4.0, 6.0, 4.0, 1.0]) / 16.0
    return tf.reshape(tf.tensordot(taps, taps, axes=0), (5, 5, 1, 1))


def _rotation(angle: tf.Tensor) -> tf.Tensor:
    """ImageProjectiveTransformV3's 8 numbers for a turn of `angle` about the image's centre."""
    cos, sin = tf.cos(angle), tf.sin(angle)
    centre = (CROP - 1) / 2.0
    x_offset = centre - (cos * centre - sin * centre)
    y_offset = centre - (sin * centre + cos * centre)
    return tf.stack([cos, -sin, x_offset, sin, cos, y_offset, 0.0, 0.0])[tf.newaxis]


def augment(image: tf.Tensor, index: tf.Tensor, passes: int) -> tf.Tensor:
    """One training example's preprocessing (the heavy part), seeded by its index: uint8 28x28x1 -> uint8 56x56x1."""
    seeds = tf.random.experimental.stateless_split(tf.stack([tf.constant(SEED, tf.int64), index]), 5)
    big = tf.image.resize(tf.cast(image, tf.float32), (SIZE, SIZE), method="bilinear")
    cropped = tf.image.stateless_random_crop(big, (CROP, CROP, 1), seed=seeds[0])
    angle = tf.random.stateless_uniform([], seeds[1], -MAX_ANGLE, MAX_ANGLE)
    turned = tf.raw_ops.ImageProjectiveTransformV3(
        images=cropped[tf.newaxis], transforms=_rotation(angle), output_shape=[CROP, CROP], fill_value=0.0,
        interpolation="BILINEAR", fill_mode="CONSTANT")[0]
    jittered = tf.image.stateless_random_contrast(
        tf.image.stateless_random_brightness(turned, 25.0, seeds[2]), 0.7, 1.3, seeds[3])
    noisy = blur(jittered, passes) + tf.random.stateless_normal((CROP, CROP, 1), seeds[4], stddev=12.0)
    return tf.cast(tf.clip_by_value(noisy, 0.0, 255.0), tf.uint8)


def blur(image: tf.Tensor, passes: int) -> tf.Tensor:
    """`passes` 5x5 Gaussian blurs of a 56x56x1 image: most of the work, one small op after another."""
    blurred = image[tf.newaxis]
    for _ in range(passes):
        blurred = tf.nn.depthwise_conv2d(blurred, _kernel(), strides=[1, 1, 1, 1], padding="SAME")
    return blurred[0]


def centre(image: tf.Tensor, passes: int = 0) -> tf.Tensor:
    """A validation image: upscaled, centre-cropped and blurred as training images are, without their chance."""
    big = tf.image.resize(tf.cast(image, tf.float32), (SIZE, SIZE), method="bilinear")
    offset = (SIZE - CROP) // 2
    return tf.cast(tf.clip_by_value(blur(big[offset:offset + CROP, offset:offset + CROP], passes), 0.0, 255.0),
                   tf.uint8)


def train_dataset(input_context: tf.distribute.InputContext, batch_size: int, config: Any) -> tf.data.Dataset:
    """One pass: this pipeline's share of the images in a seeded order, in batches, each example augmented on its
    own. The source is the batches' numbers, not the examples: through the data service (`distributed_epoch`) each
    element of the source is a split a data worker asks the dispatcher for (a fault-tolerant dispatcher journals
    each), and a split per example capped the service here at about 1,700 images/s. Its length is known without
    an assert_cardinality, which a data worker given part of the splits would break."""
    splits = _splits(config)
    images = tf.constant(splits.train_images[..., None])
    labels = tf.constant(splits.train_labels.astype("int64"))
    order = np.random.default_rng(SEED).permutation(len(splits.train_images))
    mine = order[input_context.input_pipeline_id::input_context.num_input_pipelines]
    batches = tf.constant(mine[:len(mine) // batch_size * batch_size].reshape(-1, batch_size))
    passes = work()

    def batch(number: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        indices = tf.gather(batches, number)
        augmented = tf.map_fn(lambda index: augment(tf.gather(images, index), index, passes), indices,
                              fn_output_signature=tf.TensorSpec((CROP, CROP, 1), tf.uint8))
        return augmented, tf.gather(labels, indices)

    return (tf.data.Dataset.range(batches.shape[0])
            .map(batch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
            .prefetch(tf.data.AUTOTUNE))


def validation_dataset(input_context: tf.distribute.InputContext, batch_size: int, config: Any) -> tf.data.Dataset:
    splits = _splits(config)
    passes = work()
    data = tf.data.Dataset.from_tensor_slices((splits.validation_images[..., None],
                                               splits.validation_labels.astype("int64")))
    return (data.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
            .map(lambda image, label: (centre(image, passes), label)).batch(batch_size).cache())


def build_model() -> keras.Model:
    model = keras.Sequential([
        keras.layers.InputLayer(input_shape=(CROP, CROP, 1)),
        keras.layers.Rescaling(1.0 / 255.0),
        keras.layers.Conv2D(32, 5, strides=2, padding="same", activation="relu"),
        keras.layers.Conv2D(64, 3, strides=2, padding="same", activation="relu"),
        keras.layers.Conv2D(128, 3, strides=2, padding="same", activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(10),
    ])
    model.compile(optimizer=keras.optimizers.Adam(2e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def describe(config: Any) -> str:
    return (f"input-bound MNIST: {len(_splits(config).train_images)} training images upscaled to {SIZE}x{SIZE}, "
            f"cropped to {CROP}x{CROP}, turned, jittered, blurred {work()}x and noised, one at a time")
