"""A user's task module for the tests: a small regression on data made from a fixed seed (not MNIST).

Deterministic on purpose, as the README asks of a task whose resume is exact: a
seeded shuffle over a finite dataset, reshuffled each pass.
"""

import numpy as np
import tensorflow as tf
import tf_keras as keras

EXAMPLES = 2048
VALIDATION = 512
FEATURES = 8


def _data() -> tuple[np.ndarray, np.ndarray]:
    """Training examples first, then validation's: one function to learn."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(EXAMPLES + VALIDATION, FEATURES)).astype("float32")
    weights = rng.normal(size=(FEATURES, 1)).astype("float32")
    return x, np.tanh(x @ weights).astype("float32")


def build_model():
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(32, activation="relu"),
                              keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.legacy.Adam(0.01), loss="mse", metrics=["mae"])
    return model


def train_dataset(input_context, batch_size):
    x, y = _data()
    dataset = tf.data.Dataset.from_tensor_slices((x[:EXAMPLES], y[:EXAMPLES]))
    dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return dataset.shuffle(EXAMPLES, seed=1).batch(batch_size, drop_remainder=True)


def validation_dataset(input_context, batch_size):
    x, y = _data()
    dataset = tf.data.Dataset.from_tensor_slices((x[EXAMPLES:], y[EXAMPLES:]))
    return dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id).batch(64)
