"""The baseline: a plain Keras MNIST script of the seeds' design.

Same model as hpc-train's default, batch 64, `from_tensor_slices -> shuffle ->
repeat -> batch`, default compile settings and fit's default progress bar. It
runs on tf-keras, as hpc-train does, so a comparison measures the trainer, not a
Keras version. `benchmarks/bench_trainer.py` imports `build()`; run alone it
prints the images/s of each epoch as JSON:

    python benchmarks/seed_train.py DATA_DIR EPOCHS
"""

import json
import os
import sys
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

BATCH_SIZE = 64


def build(train_images, train_labels, keras=None):
    """The seed's model and dataset; returns (model, dataset, steps per epoch).

    `keras` is the Keras to build with: tf-keras by default; the `keras` package
    (Keras 3) is what a plain `tf.keras` script gets on TensorFlow 2.16 and newer.
    """
    keras = keras or tf.keras
    x_train = train_images[..., None] / 255.0
    model = keras.models.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10),
    ])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    dataset = tf.data.Dataset.from_tensor_slices((x_train, train_labels)).shuffle(10000).repeat().batch(BATCH_SIZE)
    return model, dataset, len(x_train) // BATCH_SIZE


if __name__ == "__main__":
    from hpc_train.mnist import load_mnist  # the same 8,000 images, read the same way

    splits = load_mnist(sys.argv[1])
    model, dataset, steps = build(splits.train_images, splits.train_labels)
    rates = []
    for epoch in range(int(sys.argv[2])):
        start = time.perf_counter()
        model.fit(dataset, epochs=epoch + 1, initial_epoch=epoch, steps_per_epoch=steps)
        rates.append(steps * BATCH_SIZE / (time.perf_counter() - start))
    print(json.dumps({"images_per_second": rates}))
