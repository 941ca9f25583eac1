"""A fit's training iterator kept past the fit's return (training/keptiterator.py): its teardown is not the fit's
end, a later fit lets the one before go, and the ledger's stamped train function still measures."""

from __future__ import annotations

import gc
import weakref

import pytest

from tests.training.test_goodput import dataset, model

pytestmark = pytest.mark.tensorflow


def test_the_training_iterator_outlives_the_fit_until_the_next_one() -> None:
    from hpc_train.training.keptiterator import KeptIterator

    kept = KeptIterator()
    trained = model(2)
    trained.fit(dataset(), epochs=1, steps_per_epoch=4, verbose=0, callbacks=[kept])
    first = weakref.ref(kept.iterator)  # (Keras dropped it as the fit returned: held here alone)
    gc.collect()
    assert first() is not None
    trained.fit(dataset(), epochs=1, steps_per_epoch=4, verbose=0, callbacks=[kept])
    gc.collect()
    assert first() is None and kept.iterator is not None  # the first let go by the second fit, which holds its own
    assert trained.train_function.keeps_iterator is kept  # wrapped once, not once a fit


def test_behind_the_ledgers_callback_the_steps_are_still_stamped_and_timed() -> None:
    from hpc_train.training.goodput import Goodput
    from hpc_train.training.keptiterator import KeptIterator

    goodput, kept = Goodput(), KeptIterator()
    trained = model(2)
    for _ in range(2):  # a later fit: neither wraps again
        trained.fit(dataset(0.05), epochs=1, steps_per_epoch=6, verbose=0, callbacks=[goodput, kept])
    assert trained.train_function.stamps_waits and trained.train_function.keeps_iterator is kept
    assert kept.iterator is not None and goodput.totals()["input"] > 0  # the producer's sleeps: waited for
