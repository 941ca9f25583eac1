"""A fit's training iterator kept past the fit's return, so that a job's rank that is done never waits for its
teardown (issue 48: a finished job does not hold its allocation for nothing).

When `model.fit` returns, Keras drops its training iterator and TensorFlow tears it down then and there: it
cancels the input pipeline's threads and waits for their work in flight. On a loaded machine that took 2 to
14 s after the last step of the demo job, in one rank or the other (BENCHMARKS.md), while the job held its
nodes. A job's rank that is done leaves without any teardown (outcome.leave_when_done), so the iterator is held
here instead: the last fit's only, a later fit of the same model letting the one before go (torn down there,
before it trains). Under ParameterServerStrategy the chief schedules its steps on the workers and the train
function is left alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hpc_train.training.keras import keras


class KeptIterator(keras.callbacks.Callback):
    """Holds the training iterator of the model's last fit (`iterator`) until a later fit or the process ends.

    Put it after the callbacks that replace the model's train function at the train's begin (the ledger's Goodput):
    it wraps whatever train function they leave.
    """

    def __init__(self) -> None:
        super().__init__()
        self._supports_tf_logs = True  # ignores the logs: allowed under ParameterServerStrategy
        self.iterator: Any = None

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self.iterator = None  # the previous fit's goes now, before this one trains
        function = self.model.train_function
        if function is None or getattr(self.model, "_cluster_coordinator", None) is not None:
            return
        if getattr(function, "keeps_iterator", None) is not self:  # (a later fit: wrapped already)
            self.model.train_function = holding(function, self)


def holding(function: Callable[[Any], Any], keeper: KeptIterator) -> Callable[[Any], Any]:
    """`function` (a train function, called with the fit's iterator), noting each iterator in `keeper`. What marks
    the function it wraps (the ledger's `stamps_waits`) marks this one too, for the callbacks of a later fit."""

    def train(iterator: Any) -> Any:
        keeper.iterator = iterator
        return function(iterator)

    train.keeps_iterator = keeper  # type: ignore[attr-defined]
    if getattr(function, "stamps_waits", False):
        train.stamps_waits = True  # type: ignore[attr-defined]
    return train
