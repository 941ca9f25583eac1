"""TensorFlow's Keras multi-worker tutorial, in its shape: `tf.keras`, `model.fit`, MultiWorkerMirroredStrategy,
and nothing about the environment: it sets no TF_USE_LEGACY_KERAS and makes no TF_CONFIG. Under hpc-train it runs
as it is, on every rank:

    hpc-train submit --nodes 2 -- python examples/keras_multiworker.py
    hpc-train submit --nodes 2 --local -- python examples/keras_multiworker.py     # without Slurm

hpc-train gives each rank its TF_CONFIG, and makes `tf.keras` tf-keras (Keras 3 cannot run `model.fit` under this
strategy). The tutorial downloads MNIST; this script makes images of the same shape, so it runs anywhere.
"""

import json
import os

import numpy as np
import tensorflow as tf


def mnist_dataset(batch_size):
    """28x28 images of 10 classes, made: class k is a band of brighter rows at 2k, in noise."""
    rng = np.random.default_rng(0)
    y_train = rng.integers(0, 10, 6000)
    x_train = rng.random((6000, 28, 28)).astype(np.float32) * 0.5
    for index, label in enumerate(y_train):
        x_train[index, 2 * label:2 * label + 3, :] += 0.5
    return tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(6000, seed=0).repeat().batch(batch_size)


def build_and_compile_cnn_model():
    model = tf.keras.Sequential([
        tf.keras.layers.InputLayer(input_shape=(28, 28)),
        tf.keras.layers.Reshape(target_shape=(28, 28, 1)),
        tf.keras.layers.Conv2D(32, 3, activation="relu"),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(128, activation="relu"),
        tf.keras.layers.Dense(10),
    ])
    model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  optimizer=tf.keras.optimizers.SGD(learning_rate=0.01), metrics=["accuracy"])
    return model


per_worker_batch_size = 64
tf_config = json.loads(os.environ["TF_CONFIG"])
num_workers = len(tf_config["cluster"]["worker"])

strategy = tf.distribute.MultiWorkerMirroredStrategy()

global_batch_size = per_worker_batch_size * num_workers
multi_worker_dataset = mnist_dataset(global_batch_size)

with strategy.scope():
    # Model building and compiling need to be within `strategy.scope()`.
    multi_worker_model = build_and_compile_cnn_model()

history = multi_worker_model.fit(multi_worker_dataset, epochs=3, steps_per_epoch=20, verbose=2)
print(f"done: worker {tf_config['task']['index']}, accuracy {history.history['accuracy'][-1]:.3f}", flush=True)
