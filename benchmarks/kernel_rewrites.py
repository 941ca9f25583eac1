"""Two exact rewrites of the default CNN's costliest kernels, timed side by side against the model as it is.

`hpc-train bench trainer` found the trainer running at the rate of the model's own kernels (the 1-channel
convolution's weight gradient and max pooling's backward pass take the most). This times, in one process,
4 alternating rounds of 320 steps (batch 64, steps_per_execution 32, random images) of:
  conv+maxpool       the trainer's model (Conv2D, MaxPooling2D, ReLU after the pooling);
  patch+maxpool      the convolution as 3x3 patches times the kernel (extract_patches + matmul);
  conv+reshapepool   max pooling as a reshape to 2x2 blocks + reduce_max;
  patch+reshapepool  both.
Each prints its median images/s and every round's.

    python benchmarks/kernel_rewrites.py [POLICY]     # POLICY: mixed_bfloat16 (default) or float32
"""

from __future__ import annotations

import os
import sys
import time

os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

ROUNDS, STEPS, BATCH = 4, 320, 64


class PatchConv(keras.layers.Conv2D):
    """A VALID, stride-1 Conv2D computed as its input's patches times the kernel: the same function."""

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        size = self.kernel_size[0]
        patches = tf.image.extract_patches(inputs, [1, size, size, 1], [1, 1, 1, 1], [1, 1, 1, 1], "VALID")
        kernel = tf.reshape(tf.cast(self.kernel, patches.dtype), [-1, self.filters])
        out = tf.matmul(tf.reshape(patches, [-1, kernel.shape[0]]), kernel)
        shape = tf.shape(patches)
        return tf.reshape(out, [shape[0], shape[1], shape[2], self.filters]) + tf.cast(self.bias, patches.dtype)


class ReshapePool(keras.layers.Layer):
    """2x2 max pooling as a reshape into blocks and a reduce_max over them."""

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        shape = tf.shape(inputs)
        blocks = tf.reshape(inputs, [shape[0], shape[1] // 2, 2, shape[2] // 2, 2, inputs.shape[-1]])
        return tf.reduce_max(blocks, axis=[2, 4])


def model(conv: type, pool: type) -> keras.Model:
    built = keras.Sequential([keras.Input((28, 28, 1)), conv(32, 3), pool(), keras.layers.ReLU(),
                              keras.layers.Flatten(), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(10, dtype="float32")])
    built.compile(optimizer=keras.optimizers.legacy.Adam(1e-3), metrics=["accuracy"], steps_per_execution=32,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return built


def main() -> None:
    keras.mixed_precision.set_global_policy(sys.argv[1] if len(sys.argv) > 1 else "mixed_bfloat16")
    pool = keras.layers.MaxPooling2D
    variants = {"conv+maxpool": (keras.layers.Conv2D, pool), "patch+maxpool": (PatchConv, pool),
                "conv+reshapepool": (keras.layers.Conv2D, ReshapePool), "patch+reshapepool": (PatchConv, ReshapePool)}
    images = np.random.rand(BATCH * 64, 28, 28, 1).astype("float32")
    labels = np.random.randint(0, 10, BATCH * 64)
    data = tf.data.Dataset.from_tensor_slices((images, labels)).batch(BATCH).repeat().prefetch(4)
    models = {name: model(*layers) for name, layers in variants.items()}
    for built in models.values():
        built.fit(data, steps_per_epoch=64, epochs=1, verbose=0)  # traced and warmed before any timing
    rates: dict[str, list[float]] = {name: [] for name in models}
    for round_ in range(ROUNDS):
        for name, built in (list(models.items()) if round_ % 2 == 0 else list(reversed(models.items()))):
            start = time.perf_counter()
            built.fit(data, steps_per_epoch=STEPS, epochs=1, verbose=0)
            rates[name].append(STEPS * BATCH / (time.perf_counter() - start))
    for name, figures in rates.items():
        print(f"{name:18s} {np.median(figures):8,.0f} images/s  rounds: {', '.join(f'{f:,.0f}' for f in figures)}")


if __name__ == "__main__":
    main()
