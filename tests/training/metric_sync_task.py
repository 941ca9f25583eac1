"""One worker of a 2-worker MultiWorkerMirrored fit whose workers see labels of different accuracy.

    python -m tests.training.metric_sync_task   (TF_CONFIG names the cluster and this task)

The learning rate is 0, so the model never changes: worker 0's labels are its
own predictions (accuracy 1), worker 1's are right for every other image
(accuracy 0.5). Prints one JSON line: the per-batch logs this worker's
callbacks saw, and the epoch's logs (training and validation). For test_metrics.py.
"""

from __future__ import annotations

import json
import os

import numpy as np

from hpc_train.training.keras import keras, tf
from hpc_train.tasks.mnist.model import build_model, compile_model
from hpc_train.training.metrics import sync_metrics_per_epoch

IMAGES = 64
PER_REPLICA_BATCH = 16


class BatchLogs(keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[dict[str, float]] = []

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self.seen.append({name: float(value) for name, value in (logs or {}).items()})


def labels_for(worker: int, predictions: np.ndarray) -> np.ndarray:
    if worker == 0:
        return predictions
    return np.where(np.arange(len(predictions)) % 2 == 0, predictions, (predictions + 1) % 10)


def main() -> None:
    worker = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = build_model("cnn")
        compile_model(model, "sgd", 0.0, steps_per_execution=2)
    sync_metrics_per_epoch(model)
    images = np.random.default_rng(0).random((IMAGES, 28, 28, 1), dtype=np.float32)
    labels = labels_for(worker, np.argmax(model(images, training=False).numpy(), axis=1))

    def make(context: tf.distribute.InputContext) -> tf.data.Dataset:
        return tf.data.Dataset.from_tensor_slices((images, labels)).batch(PER_REPLICA_BATCH).repeat()

    data = keras.utils.experimental.DatasetCreator(make)
    batches = BatchLogs()
    history = model.fit(data, epochs=1, steps_per_epoch=4, validation_data=data, validation_steps=4,
                        callbacks=[batches], verbose=0)
    print(json.dumps({"batches": batches.seen, "epoch": {key: values[-1] for key, values in history.history.items()}}),
          flush=True)


if __name__ == "__main__":
    main()
