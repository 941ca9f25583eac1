"""Keras' own fault tolerance on Slurm: `tf.keras.callbacks.BackupAndRestore`, its backup in the job's folder.

`model.fit` backs up at the end of every epoch into `backup_dir`; a run started again (a requeued job, after
`scontrol requeue`, a preemption or a node failure) restores the backup and goes on from the epoch after it.
hpc-train gives every rank HPC_TRAIN_RUN_DIR, the job's folder, the same on every run of the job:

    hpc-train submit --nodes 2 -- python examples/backup_restore.py
    scontrol requeue JOBID     # at any time: the rerun goes on after the last epoch backed up
    hpc-train submit --nodes 2 -- python examples/backup_restore.py --epochs 10   # shorter

Under hpc-train `tf.keras` is tf-keras (Keras 3 cannot run `model.fit` under MultiWorkerMirroredStrategy).
"""

import argparse
import os

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser(description="Keras' BackupAndRestore under hpc-train")
parser.add_argument("--epochs", type=int, default=20, help="epochs of 100 steps (default: 20)")
EPOCHS = parser.parse_args().epochs


class SayEpochs(tf.keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        print(f"epoch {epoch + 1}/{EPOCHS} begins (restart {os.environ.get('SLURM_RESTART_COUNT', '0')})",
              flush=True)


def dataset(global_batch):
    """Made data: the label says whether the first half of the 16 features outweighs the second."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4096, 16)).astype(np.float32)
    y = (x[:, :8].sum(axis=1) > x[:, 8:].sum(axis=1)).astype(np.int64)
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(4096, seed=0).repeat().batch(global_batch)


strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(64, activation="relu", input_shape=(16,)),
                                 tf.keras.layers.Dense(2)])
    model.compile(optimizer=tf.keras.optimizers.SGD(learning_rate=0.05), metrics=["accuracy"],
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))

backup_dir = os.path.join(os.environ.get("HPC_TRAIN_RUN_DIR", "/tmp/backup-restore"), "backup")
history = model.fit(dataset(64 * strategy.num_replicas_in_sync), epochs=EPOCHS, steps_per_epoch=100, verbose=0,
                    callbacks=[tf.keras.callbacks.BackupAndRestore(backup_dir=backup_dir), SayEpochs()])
print(f"done: accuracy {history.history['accuracy'][-1]:.3f}", flush=True)
