from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.fake_slurm import without_slurm
from tests.training.runs import finish, local_cluster, task_config

pytestmark = pytest.mark.tensorflow

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name, layer_types, parameters", [
    ("cnn", ["Conv2D", "MaxPooling2D", "ReLU", "Flatten", "Dense", "Dense"],
     (3 * 3 * 32 + 32) + (13 * 13 * 32 * 64 + 64) + (64 * 10 + 10)),
    ("deep", ["Conv2D", "MaxPooling2D", "ReLU", "Conv2D", "MaxPooling2D", "ReLU", "Flatten", "Dense", "Dropout", "Dense"],
     (5 * 5 * 32 + 32) + (5 * 5 * 32 * 64 + 64) + (7 * 7 * 64 * 1024 + 1024) + (1024 * 10 + 10)),
])
def test_models_are_the_seeds_designs(name: str, layer_types: list[str], parameters: int) -> None:
    from hpc_train.training.model import build_model

    model = build_model(name)
    assert [type(layer).__name__ for layer in model.layers] == layer_types
    assert model.count_params() == parameters
    assert model(np.zeros((2, 28, 28, 1), np.float32)).shape == (2, 10)


@pytest.mark.parametrize("name", ["cnn", "deep"])
def test_pooling_before_the_relu_computes_the_seeds_order_exactly(name: str) -> None:
    """Outputs and gradients equal those of the seeds' Conv2D(activation="relu") then MaxPooling2D."""
    from hpc_train.training.keras import keras, tf
    from hpc_train.training.model import build_model

    model = build_model(name)
    seeds_order = keras.Sequential([
        keras.Input((28, 28, 1)),
        *(layer if not isinstance(layer, keras.layers.Conv2D) else
          keras.layers.Conv2D.from_config({**layer.get_config(), "activation": "relu"})
          for layer in model.layers if not isinstance(layer, keras.layers.ReLU))])
    seeds_order.set_weights(model.get_weights())
    images = tf.random.stateless_normal((8, 28, 28, 1), seed=(1, 2))  # about half the pre-activations negative

    def outputs_and_gradients(network: keras.Model) -> list[np.ndarray]:
        with tf.GradientTape() as tape:
            logits = network(images, training=False)
        return [logits.numpy(), *(gradient.numpy() for gradient in tape.gradient(logits, network.trainable_weights))]

    for ours, theirs in zip(outputs_and_gradients(model), outputs_and_gradients(seeds_order), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)


def test_two_workers_sum_their_metrics_at_epoch_ends_and_keep_their_own_between() -> None:
    """Per step, only the gradients cross workers; the epoch's figures are still both workers' together."""
    cluster = local_cluster(worker=2)
    workers = [subprocess.Popen([sys.executable, "-m", "tests.training.metric_sync_task"], cwd=ROOT,
                                env={**without_slurm(), "TF_CONFIG": json.dumps(task_config(cluster, "worker", index))},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for index in range(2)]
    results = finish(workers)
    for code, _, err in results:
        assert code == 0, err[-3000:]
    (_, out0, _), (_, out1, _) = results
    first, second = json.loads(out0.splitlines()[-1]), json.loads(out1.splitlines()[-1])
    # Worker 0's labels are all right, worker 1's half: together 0.75, on both workers.
    for seen in (first, second):
        assert seen["epoch"]["accuracy"] == pytest.approx(0.75)
        assert seen["epoch"]["val_accuracy"] == pytest.approx(0.75)
    assert first["epoch"]["loss"] == pytest.approx(second["epoch"]["loss"])
    # Between epoch ends, each worker's callbacks see its own running values: no all-reduce made them.
    assert [logs["accuracy"] for logs in first["batches"]] == pytest.approx([1.0, 1.0])
    assert [logs["accuracy"] for logs in second["batches"]] == pytest.approx([0.5, 0.5])
    assert first["batches"][-1]["loss"] < first["epoch"]["loss"] < second["batches"][-1]["loss"]
