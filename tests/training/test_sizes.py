"""The same training at every size (a node range's attempts, docs/jobs.md "Node ranges"): with one global batch,
1 and 2 replicas (two logical CPUs, MirroredStrategy) end with the same weights after the same steps, and a
checkpoint saved at one size restores at the other. Run in a fresh Python: logical devices are set before
TensorFlow starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.tensorflow

SCRIPT = r'''
import sys

import numpy as np
import tensorflow as tf
import tf_keras as keras

tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                          [tf.config.LogicalDeviceConfiguration()] * 2)
from hpc_train.tasks.mnist.model import build_model, compile_model
from hpc_train.tasks.mnist.pipeline import training_dataset_fn
from hpc_train.training.progress import replica_batch
from hpc_train.config import TrainConfig

images = np.random.default_rng(0).integers(0, 255, (96, 28, 28), dtype=np.uint8)
labels = np.arange(96, dtype=np.uint8) % 10
config = TrainConfig(global_batch=24)


def trained(replicas, steps_done, checkpoint=None, steps=4):
    strategy = tf.distribute.MirroredStrategy([f"/cpu:{index}" for index in range(replicas)])
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = build_model("cnn")
        compile_model(model, "sgd", 0.1, steps_per_execution=1)
        saved = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    if checkpoint:
        saved.restore(checkpoint).assert_existing_objects_matched()
    batch = replica_batch(config, replicas).batch_size  # the global batch shared out
    # The trainer's data position: each pipeline (one here) has read a batch a replica a step (_batches_done).
    make = training_dataset_fn(images, labels, per_replica_batch=batch, seed=3, batches_done=steps_done * replicas)
    model.fit(strategy.distribute_datasets_from_function(make), epochs=1, steps_per_epoch=steps, verbose=0)
    return model, saved


def flat(model):
    return np.concatenate([weights.ravel() for weights in model.get_weights()])


one, _ = trained(1, 0)
two, _ = trained(2, 0)
print("SAME", float(np.max(np.abs(flat(one) - flat(two)))))
# Two steps on 1 replica, saved; two more on 2 replicas from there: as four on 1.
half, saved = trained(1, 0, steps=2)
path = saved.save(sys.argv[1] + "/ckpt")
resumed, _ = trained(2, 2, checkpoint=path, steps=2)
print("RESUMED", float(np.max(np.abs(flat(one) - flat(resumed)))), int(resumed.optimizer.iterations.numpy()))
'''


def test_one_global_batch_trains_the_same_on_one_or_two_replicas_and_resumes_across_them(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    same = float(result.stdout.split("SAME ")[1].split()[0])
    resumed, steps = result.stdout.split("RESUMED ")[1].split()[:2]
    assert same < 1e-6, result.stdout
    assert float(resumed) < 1e-6 and int(steps) == 4, result.stdout
