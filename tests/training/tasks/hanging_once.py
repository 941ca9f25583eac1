"""A task module for the tests whose data stops flowing on every rank at once, on the first attempt only.

After FLOWING batches of the first attempt (SLURM_RESTART_COUNT unset or 0:
every run outside Slurm) its generator says so on stderr and waits for good in
`wait_for_the_file_server`, on every rank: a hang all ranks share, which only
the job's watchdog sees; the step that waits for the next batch never returns
(the main thread stays in TensorFlow's C++, a stop request never reaches a step
boundary). A retry's data flows.

On the first attempt each rank also says when it trained the last batch there
is (`LAST_BATCH_LINE`, from inside the training step): with steps_per_execution
not dividing FLOWING, that step comes after the last step boundary, so from
that line on the rank is stuck in a step for good (a test's event to wait for).
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
LAST_BATCH_LINE = f"hanging task: trained batch {FLOWING}, the last there is"


def _first_attempt():
    return os.environ.get("SLURM_RESTART_COUNT", "0") == "0"


class SaysItsLastBatch(keras.Sequential):
    """A model that prints LAST_BATCH_LINE from the training step that trained batch FLOWING."""

    def train_step(self, data):
        logs = super().train_step(data)
        if _first_attempt():  # when traced; a retry's data flows past FLOWING
            tf.cond(tf.equal(self.optimizer.iterations, FLOWING), _say_last_batch, lambda: tf.constant(False))
        return logs


def _say_last_batch():
    tf.print(LAST_BATCH_LINE, output_stream=sys.stderr)  # in the graph: printed by C++, at no step boundary
    return tf.constant(True)


def build_model():
    layers = [keras.Input((FEATURES,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)]
    model = SaysItsLastBatch(layers)
    model.compile(optimizer=keras.optimizers.legacy.SGD(0.01), loss="mse")
    return model


def wait_for_the_file_server():
    NEVER.wait()  # a file server that stopped answering


def _batches(batch_size):
    rng = np.random.default_rng(0)
    first_attempt = _first_attempt()
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
