"""The user's task of `hpc-train bench task`: a small dense classifier on generated tabular data.

A task module as a user would write one (hpc_train/training/usertask.py): no
hpc-train imports, plain TensorFlow and tf_keras, default compile settings. It
is deliberately not the MNIST CNN: 64 features, two hidden layers of 512,
10 classes (300k weights; with Adam's two slots a checkpoint holds 3.6 MB),
so a step of 64 examples takes a few milliseconds on one CPU core.

    hpc-train train --task hpc_train/bench/bench_task.py --set strategy=none --set steps_per_epoch=200
"""

import numpy as np
import tensorflow as tf
import tf_keras as keras

FEATURES = 64
CLASSES = 10
EXAMPLES = 16_384
HIDDEN = 512


def generated_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian features; each label is the class a fixed random linear teacher scores highest (with noise)."""
    rng = np.random.default_rng(seed)
    features = rng.standard_normal((EXAMPLES, FEATURES), dtype=np.float32)
    teacher = rng.standard_normal((FEATURES, CLASSES), dtype=np.float32)
    noise = 0.5 * rng.standard_normal((EXAMPLES, CLASSES), dtype=np.float32)
    labels = np.argmax(features @ teacher + noise, axis=1).astype(np.int32)
    return features, labels


def build_model() -> keras.Model:
    model = keras.Sequential([
        keras.Input((FEATURES,)),
        keras.layers.Dense(HIDDEN, activation="relu"),
        keras.layers.Dense(HIDDEN, activation="relu"),
        keras.layers.Dense(CLASSES),
    ])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def train_dataset(input_context: tf.distribute.InputContext, batch_size: int) -> tf.data.Dataset:
    """One pass over this pipeline's share of the examples, shuffled with a fixed seed, in full batches."""
    features, labels = generated_data()
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    dataset = dataset.shuffle(EXAMPLES, seed=0)
    return dataset.batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
