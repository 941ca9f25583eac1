"""A task module for the tests whose steps take a known time and whose input pipeline may sleep a known time.

Each training step computes COMPUTE_SECONDS (a sleep in the model's forward pass: on a shared, loaded machine a
CPU's share would change between two runs, a sleep's length does not), and each batch's producer sleeps
`SLOW_INPUT_SECONDS` from the job's environment (unset or 0: no sleep) before the prefetch, as a slow pipeline
does. The goodput ledger's `input` share of such a job is known in advance (tests/e2e/test_task_modules.py).
"""

import os
import time

import numpy as np
import tensorflow as tf
import tf_keras as keras

EXAMPLES = 512
FEATURES = 8
COMPUTE_SECONDS = 0.32
SLEEP_VARIABLE = "SLOW_INPUT_SECONDS"


class Busy(keras.layers.Layer):
    """The step's compute, made a known wait."""

    def call(self, inputs):
        with tf.control_dependencies([tf.py_function(lambda: time.sleep(COMPUTE_SECONDS), [], [])]):
            return tf.identity(inputs)


def build_model():
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(16, activation="relu"), Busy(),
                              keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.legacy.SGD(0.01), loss="mse")
    return model


def train_dataset(input_context, batch_size):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(EXAMPLES, FEATURES)).astype("float32")
    dataset = tf.data.Dataset.from_tensor_slices((x, x.sum(axis=1, keepdims=True)))
    dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    dataset = dataset.batch(batch_size, drop_remainder=True).cache()
    sleep = float(os.environ.get(SLEEP_VARIABLE) or 0)
    if sleep:  # the producer's delay per batch: TensorFlow's own sleep (C++, holding no lock Python needs)
        from tensorflow.python.data.experimental.ops.testing import sleep as sleeping

        dataset = dataset.apply(sleeping(int(sleep * 1e6)))
    return dataset.prefetch(2)
