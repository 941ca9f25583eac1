from __future__ import annotations


import numpy as np
import pytest


pytestmark = pytest.mark.tensorflow



@pytest.mark.parametrize("name, layer_types, parameters", [
    ("cnn", ["Conv2D", "MaxPooling2D", "ReLU", "Flatten", "Dense", "Dense"],
     (3 * 3 * 32 + 32) + (13 * 13 * 32 * 64 + 64) + (64 * 10 + 10)),
    ("deep", ["Conv2D", "MaxPooling2D", "ReLU", "Conv2D", "MaxPooling2D", "ReLU", "Flatten", "Dense", "Dropout", "Dense"],
     (5 * 5 * 32 + 32) + (5 * 5 * 32 * 64 + 64) + (7 * 7 * 64 * 1024 + 1024) + (1024 * 10 + 10)),
])
def test_models_are_the_seeds_designs(name: str, layer_types: list[str], parameters: int) -> None:
    from hpc_train.tasks.mnist.model import build_model

    model = build_model(name)
    assert [type(layer).__name__ for layer in model.layers] == layer_types
    assert model.count_params() == parameters
    assert model(np.zeros((2, 28, 28, 1), np.float32)).shape == (2, 10)


@pytest.mark.parametrize("name", ["cnn", "deep"])
def test_pooling_before_the_relu_computes_the_seeds_order_exactly(name: str) -> None:
    """Outputs and gradients equal those of the seeds' Conv2D(activation="relu") then MaxPooling2D."""
    from hpc_train.training.keras import keras, tf
    from hpc_train.tasks.mnist.model import build_model

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
