"""A task module for a model that is not the MNIST CNN: which of 4 frequencies a noisy signal has.

    hpc-train train --task examples/sequence_task.py --set epochs=5
    hpc-train submit --nodes 2 --task examples/sequence_task.py --set epochs=5

hpc-train calls these functions on every task; it shards nothing itself, so
each input pipeline takes its own share with `input_context`. The data is made
from a fixed seed (nothing to download) and shuffled with a seed, so the
batches are the same each time train_dataset is called: a requeued job resumes
with the very batch that was next.
"""

import numpy as np
import tensorflow as tf
import tf_keras as keras

LENGTH = 64  # samples per sequence
FREQUENCIES = (1.0, 2.0, 4.0, 8.0)  # cycles per sequence: the 4 classes
TRAIN, VALIDATION = 8192, 1024


def _signals(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(len(FREQUENCIES), size=count)
    phase = rng.uniform(0, 2 * np.pi, size=(count, 1))
    time = np.linspace(0, 1, LENGTH, endpoint=False)[None, :]
    waves = np.sin(2 * np.pi * np.array(FREQUENCIES)[labels][:, None] * time + phase)
    noisy = waves + rng.normal(scale=0.5, size=waves.shape)
    return noisy[..., None].astype("float32"), labels.astype("int64")


def build_model():
    model = keras.Sequential([
        keras.Input((LENGTH, 1)),
        keras.layers.Conv1D(16, 5, activation="relu"),
        keras.layers.MaxPooling1D(2),
        keras.layers.Conv1D(32, 5, activation="relu"),
        keras.layers.GlobalAveragePooling1D(),
        keras.layers.Dense(len(FREQUENCIES)),
    ])
    model.compile(optimizer=keras.optimizers.legacy.Adam(0.003),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def _pipeline_share(signals, labels, input_context):
    dataset = tf.data.Dataset.from_tensor_slices((signals, labels))
    return dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)


def train_dataset(input_context, batch_size):
    """One epoch of this pipeline's share, in a seeded order (each pass reshuffled, the same way every time)."""
    signals, labels = _signals(TRAIN, seed=0)
    share = _pipeline_share(signals, labels, input_context)
    return share.shuffle(TRAIN, seed=1).batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def validation_dataset(input_context, batch_size):
    signals, labels = _signals(VALIDATION, seed=1)
    return _pipeline_share(signals, labels, input_context).batch(256)


def final_metrics(model):
    """Accuracy on every validation signal once: figures for metrics.json's totals.

    Only the chief calls this, so it calls the model directly: under MultiWorkerMirrored, model.predict()
    and model.evaluate() are collective and would wait for workers that have already finished.
    """
    signals, labels = _signals(VALIDATION, seed=1)
    predicted = np.argmax(model(signals, training=False).numpy(), axis=1)
    return {"final_val_accuracy": float(np.mean(predicted == labels))}


def describe():
    return (f"{len(FREQUENCIES)} frequencies in noisy signals of {LENGTH} samples: {TRAIN} training, "
            f"{VALIDATION} validation sequences")
