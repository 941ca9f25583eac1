"""Your task: the model and the data hpc-train trains. Edit the three functions; hpc-train does the rest
(TF_CONFIG and GPUs on every task, the strategy, checkpoints, stopping and requeueing on Slurm's warning,
exact resume, metrics.json, TensorBoard).

A function with a parameter named `config` gets the run's settings (config.yaml, --set, a sweep's values):
config.learning_rate, config.seed, config.epochs ... (`hpc-train train --keys` lists them). Read your settings
from there, so that a sweep over them changes what trains. (hpc-train seeds TensorFlow with config.seed before
build_model: the initial weights follow it too.)

    hpc-train train --config config.yaml --set strategy=none     # try it here, one process
    sbatch job.sbatch                                             # or: hpc-train submit --nodes 2 --config config.yaml
"""

import numpy as np
import tensorflow as tf
import tf_keras as keras  # Keras 3 cannot train under MultiWorkerMirrored or parameter-server strategies

FEATURES = 8
EXAMPLES = 8192


def _data():
    """Stand-in data, always the same (made from a fixed seed): replace with yours (read files, a tf.data
    pipeline...)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(EXAMPLES, FEATURES)).astype("float32")
    y = np.tanh(x @ rng.normal(size=(FEATURES, 1))).astype("float32")
    return x, y


def build_model(config):
    """A compiled tf_keras model; hpc-train calls it inside the strategy's scope."""
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.legacy.Adam(config.learning_rate), loss="mse", metrics=["mae"])
    return model


def train_dataset(input_context, batch_size, config):
    """One epoch of this worker's share, in batches of batch_size (per replica), in the same order every call
    (a seeded shuffle): hpc-train repeats it, and after a restart skips what was read, so resume is exact."""
    x, y = _data()
    split = int(0.9 * EXAMPLES)
    dataset = tf.data.Dataset.from_tensor_slices((x[:split], y[:split]))
    dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return dataset.shuffle(split, seed=config.seed).batch(batch_size, drop_remainder=True)


def validation_dataset(input_context, batch_size):
    """Optional: read once after every epoch (val_loss, val_mae in the log and metrics.json)."""
    x, y = _data()
    split = int(0.9 * EXAMPLES)
    dataset = tf.data.Dataset.from_tensor_slices((x[split:], y[split:]))
    return dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id).batch(256)
