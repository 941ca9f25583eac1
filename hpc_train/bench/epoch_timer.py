"""`model.fit` timed per epoch, for the benchmarks' plain baselines (plain_fit, seed_train).

A Keras callback times each epoch from its begin to its end, the way a user's script would, so the figures
leave out what fit does before the first and after the last epoch.
"""

from __future__ import annotations

import time
from typing import Any


def fit_timed(model: Any, dataset: Any, keras: Any, epochs: int, steps_per_epoch: int,
              **fit_options: Any) -> list[float]:
    """Train with `model.fit` (Keras' defaults, or `fit_options`) and return each epoch's seconds."""
    seconds: list[float] = []

    class EpochTimer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.started = time.perf_counter()

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            seconds.append(time.perf_counter() - self.started)

    model.fit(dataset, epochs=epochs, steps_per_epoch=steps_per_epoch, callbacks=[EpochTimer()],
              **fit_options)
    return seconds
