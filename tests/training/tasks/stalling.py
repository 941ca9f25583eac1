"""A task module for the tests whose data stops flowing: after FLOWING batches its generator blocks for good.

The step that waits for the next batch never returns: the main thread stays in
TensorFlow's C++, and a stop request never reaches a step boundary.
"""

import sys
import threading

import numpy as np
import tensorflow as tf
import tf_keras as keras

FEATURES = 8
FLOWING = 24  # batches; then nothing, ever
NEVER = threading.Event()


def build_model():
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.legacy.SGD(0.01), loss="mse")
    return model


def _batches(batch_size):
    rng = np.random.default_rng(0)
    for _ in range(FLOWING):
        yield rng.normal(size=(batch_size, FEATURES)).astype("float32"), np.zeros((batch_size, 1), "float32")
    print("stalling task: no more batches", file=sys.stderr, flush=True)
    NEVER.wait()  # a file server that stopped answering


def train_dataset(input_context, batch_size):
    spec = (tf.TensorSpec((batch_size, FEATURES), tf.float32), tf.TensorSpec((batch_size, 1), tf.float32))
    return tf.data.Dataset.from_generator(lambda: _batches(batch_size), output_signature=spec)
