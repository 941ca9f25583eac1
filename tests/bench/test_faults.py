"""bench faults: its figures from measured runs (the runs themselves need the local Slurm: `hpc-train bench faults`)."""

from __future__ import annotations

import pytest

from hpc_train.bench.faults import Run, projected_goodput, render


def test_goodput_with_a_failure_every_5_minutes_is_the_share_of_time_not_lost() -> None:
    assert projected_goodput(0.0) == 1.0
    assert projected_goodput(60.0) == pytest.approx(300 / 360)


def test_the_report_compares_healed_runs_with_the_uninterrupted_ones() -> None:
    pairs = [(Run(wall=40.0, training=30.0), Run(wall=60.0, training=30.5, resume=20.0, redone=31, lost=25.0)),
             (Run(wall=42.0, training=31.0), Run(wall=58.0, training=31.0, resume=18.0, redone=10, lost=21.0))]
    section = render(pairs, 30)
    assert "| kill to training resumed on other nodes, s (goal: median <= 45) | 19.0 | 18.0-20.0 |" in section
    assert "| goodput, healed (uninterrupted training / healed wall time) | 0.52 | 0.50-0.53 |" in section
    assert "each costing the median 23.0 s measured here, training keeps 93% of the wall time" in section
