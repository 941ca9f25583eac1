"""bench search: a search on a tiny synthetic set through the job's samplers and pruners, and its figures."""

from __future__ import annotations

import numpy as np

from hpc_train.bench.search import Outcome, render, search, within


def tiny(count: int = 256) -> tuple[np.ndarray, ...]:
    """Images whose label is written in their first pixels: learnable in an epoch."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, count)
    x = rng.random((count, 784), dtype=np.float32) * 0.1
    x[np.arange(count), labels] = 1.0
    return x[:200], labels[:200], x[200:], labels[200:]


def test_each_search_runs_its_budget_and_pruning_trains_fewer_epochs() -> None:
    data = tiny()
    plain = search("tpe", "none", 6, 3, 0, data)
    assert len(plain.finals) == 6 and plain.epochs == 18 and all(value is not None for value in plain.finals)
    assert list(plain.best_so_far) == sorted(plain.best_so_far) and max(plain.best_so_far) > 0.2  # above chance (0.1)
    pruned = search("random", "halving", 6, 3, 0, data)
    assert None in pruned.finals and pruned.epochs < 18
    grid = search("grid", "none", 12, 1, 0, data)
    assert len(set(grid.finals)) > 1 and grid.epochs == 12


def test_the_report_counts_trials_to_within_two_tenths_of_a_point() -> None:
    first = Outcome((0.90, None, 0.951), (0.90, 0.90, 0.951), 7)
    close = Outcome((0.95, 0.951, 0.5), (0.95, 0.951, 0.951), 9)
    assert (within(first), within(close)) == (3, 1)  # 0.95 is within 0.2 points of 0.951 already
    section = render({"tpe": [first, close, close], "grid": [Outcome((0.5, 0.6, 0.7), (0.5, 0.6, 0.7), 9)]},
                     3, 3, 12.0)
    assert "| tpe | 95.10 | 95.10-95.10 | 1 | 9 of 9 |" in section and "| grid | 70.00 | 70.00-70.00 | 3 |" in section
