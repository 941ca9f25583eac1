"""A task module for the tests whose data stops flowing on every rank at once, on the first attempt only.

After FLOWING batches of the first attempt (SLURM_RESTART_COUNT unset or 0:
every run outside Slurm) its generator says so on stderr and waits for good in
`wait_for_the_file_server`, on every rank: a hang all ranks share, which only
the job's watchdog sees; the step that waits for the next batch never returns
(the main thread stays in TensorFlow's C++, a stop request never reaches a step
boundary). A retry's data flows.
"""

import os
import sys
import threading

import numpy as np
import tensorflow as tf
import tf_keras as keras

FEATURES = 8
FLOWING = 40  # batches of the first attempt; then nothing, ever
NEVER = threading.Event()


def build_model():
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.legacy.SGD(0.01), loss="mse")
    return model


def wait_for_the_file_server():
    NEVER.wait()  # a file server that stopped answering


def _batches(batch_size):
    rng = np.random.default_rng(0)
    first_attempt = os.environ.get("SLURM_RESTART_COUNT", "0") == "0"
    count = 0
    while True:
        if first_attempt and count == FLOWING:
            print("hanging task: no more batches", file=sys.stderr, flush=True)
            wait_for_the_file_server()
        count += 1
        yield rng.normal(size=(batch_size, FEATURES)).astype("float32"), np.zeros((batch_size, 1), "float32")


def train_dataset(input_context, batch_size):
    spec = (tf.TensorSpec((batch_size, FEATURES), tf.float32), tf.TensorSpec((batch_size, 1), tf.float32))
    return tf.data.Dataset.from_generator(lambda: _batches(batch_size), output_signature=spec)
