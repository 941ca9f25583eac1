"""The baseline: a plain Keras MNIST script of the seeds' design.

Same model as hpc-train's default, batch 64, `from_tensor_slices -> shuffle ->
repeat -> batch`, default compile settings and fit's default progress bar. It
runs on tf-keras, as hpc-train does, so a comparison measures the trainer, not
a Keras version (`--keras 3`: the Keras 3 that a plain `tf.keras` script gets
on TensorFlow 2.16 and newer). Run alone, it trains and prints each epoch's
training images/s as JSON on its last line:

    python -m hpc_train.bench.seed_train DATA_DIR EPOCHS [--keras 3]
"""

import argparse
import json
import os
import sys

BATCH_SIZE = 64


def build(train_images, train_labels, keras):
    """The seed's model and dataset; returns (model, dataset, steps per epoch)."""
    import tensorflow as tf

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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir")
    parser.add_argument("epochs", type=int)
    parser.add_argument("--keras", choices=("2", "3"), default="2", help="2: tf-keras (default); 3: Keras 3")
    args = parser.parse_args(argv)
    os.environ["TF_USE_LEGACY_KERAS"] = "1" if args.keras == "2" else "0"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.keras == "2":
        import tf_keras as keras
    else:
        import keras
    from hpc_train.bench.epoch_timer import fit_timed
    from hpc_train.tasks.mnist.data import load_mnist  # the same images, read the same way

    splits = load_mnist(args.data_dir)
    model, dataset, steps = build(splits.train_images, splits.train_labels, keras)
    seconds = fit_timed(model, dataset, keras, args.epochs, steps)
    print(json.dumps({"images_per_second": [steps * BATCH_SIZE / value for value in seconds]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
