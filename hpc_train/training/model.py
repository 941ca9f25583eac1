"""The models: the seeds' small CNN (default) and the deeper deepMNIST network."""

from __future__ import annotations

import types
from typing import Any

from hpc_train.training.keras import keras, tf

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


def sync_metrics_per_epoch(model: keras.Model) -> None:
    """Under MultiWorkerMirrored, sum the metrics across workers at epoch ends only, not in every step.

    Keras' train and test steps read every metric with a cross-worker sum (two
    all-reduces each, its total and its count) and then sum the step's outputs
    over the workers once more: six small all-reduces per step beside the one
    of the gradients, run one after another, each a round trip between workers.
    At 64 images per worker, 2 workers each bound to one core reached 47% scaling
    efficiency with them and 64% without (side by side, this machine). fit() and evaluate()
    replace the last step's values with the metrics summed across workers at
    the end of each epoch and evaluation anyway (`_validate_and_get_metrics_result`),
    so only per-batch callbacks see the difference: this worker's running values.
    The method is set on the model, not by a subclass, so the saved model.keras
    stays a plain Sequential that any Keras loads.
    """
    model.distribute_reduction_method = "first"  # a step's outputs: this worker's, not summed over workers
    model.compute_metrics = types.MethodType(_compute_local_metrics, model)


def _compute_local_metrics(model: keras.Model, x: Any, y: Any, y_pred: Any, sample_weight: Any) -> dict[str, Any]:
    del x  # as in Keras' own compute_metrics
    model.compiled_metrics.update_state(y, y_pred, sample_weight)
    return {metric.name: _local_result(metric) for metric in model.metrics}


def _local_result(metric: keras.metrics.Metric) -> Any:
    """A mean metric's value from this replica's own total and count; any other metric as Keras reads it."""
    if isinstance(metric, keras.metrics.Mean):
        # Read outside Keras' sync-on-read context, a replica's variables are its own: no all-reduce.
        return tf.math.divide_no_nan(metric.total, metric.count)
    return metric.result()
