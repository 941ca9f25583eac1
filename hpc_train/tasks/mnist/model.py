"""The models: the seeds' small CNN (default) and the deeper deepMNIST network."""

from __future__ import annotations

from hpc_train.training.keras import keras

INPUT_SHAPE = (28, 28, 1)
CLASSES = 10


def build_model(name: str) -> keras.Model:
    """An uncompiled model that maps 28x28x1 images in [0, 1] to 10 logits."""
    layers = keras.layers
    if name == "cnn":
        body = [*_conv_pool_relu(32, 3, "valid"), layers.Flatten(), layers.Dense(64, activation="relu")]
    elif name == "deep":
        body = [*_conv_pool_relu(32, 5, "same"), *_conv_pool_relu(64, 5, "same"),
                layers.Flatten(), layers.Dense(1024, activation="relu"), layers.Dropout(0.5)]
    else:
        raise ValueError(f"unknown model {name!r}")  # the config allows only the two above
    # Logits stay float32 under a mixed precision policy, for a stable softmax and loss.
    return keras.Sequential([keras.Input(INPUT_SHAPE), *body, layers.Dense(CLASSES, dtype="float32")],
                            name=f"mnist_{name}")


def _conv_pool_relu(filters: int, size: int, padding: str) -> list[keras.layers.Layer]:
    """The seeds' Conv2D(activation="relu") then MaxPooling2D(2), with the ReLU moved after the pooling.

    max and ReLU commute (ReLU never reverses an order), so outputs and gradients
    are the same, but the ReLU and its gradient then run on a quarter of the
    values. The gradient of the convolution's full-size ReLU was the largest
    memory-bound kernel of a step (7-10% of a core), and memory bandwidth is
    what two workers on one machine share: 3-5% more images/s on one core,
    less lost to the other core.
    """
    layers = keras.layers
    return [layers.Conv2D(filters, size, padding=padding), layers.MaxPooling2D(2), layers.ReLU()]


# Keras' "legacy" optimizers update each variable with one fused kernel (ResourceApplyAdam...);
# the newer ones use several ops per variable, measurably slower for small models on CPU.
OPTIMIZERS = {"adam": keras.optimizers.legacy.Adam, "sgd": keras.optimizers.legacy.SGD,
              "rmsprop": keras.optimizers.legacy.RMSprop}


def compile_model(model: keras.Model, optimizer: str, learning_rate: float, steps_per_execution: int) -> None:
    model.compile(
        optimizer=OPTIMIZERS[optimizer](learning_rate=learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        steps_per_execution=steps_per_execution,
    )
