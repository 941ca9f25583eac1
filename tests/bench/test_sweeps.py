"""bench sweeps: its trials and its figures from measured runs (the runs need the local Slurm)."""

from __future__ import annotations

from hpc_train.bench.sweeps import VARIANTS, Timing, learning_rates, render


def test_the_trials_spread_the_learning_rate_on_a_log_scale() -> None:
    rates = learning_rates(4)
    assert rates[0] == 1e-5 and rates[-1] == 1e-2 and len(rates) == 4
    assert all(abs(later / earlier - 10) < 1e-6 for earlier, later in zip(rates, rates[1:]))


def test_the_report_sets_one_array_beside_separate_submits_and_pruning() -> None:
    results = {VARIANTS[0]: [Timing(0.4, 30.0, 80.0, 0.95)], VARIANTS[1]: [Timing(3.2, 33.0, 84.0, 0.95)],
               VARIANTS[2]: [Timing(0.4, 30.0, 60.0, 0.95)]}
    section = render(results, 8, 4)
    assert "| one sweep (job array) | 0.40 | 0.40-0.40 | 30.0 | 30.0-30.0 | 80.0 | 80.0-80.0 | 0.9500 |" in section
    assert "| separate submits | 3.20 |" in section
    assert "ended the sweep in 75% of the unpruned sweep's wall time" in section
