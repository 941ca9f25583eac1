"""benchmarks/data_service_auto.py's pure part: each epoch's images/s beside the input share the chief's ledger
measured for it, matched by the epoch's number."""

from __future__ import annotations

from tests.benchmarks.test_data_service_input_bound import load

auto = load("data_service_auto")


def test_each_epoch_gets_its_rate_and_the_share_measured_for_it() -> None:
    metrics = {"epochs": [{"epoch": 1, "images": 1000, "training_seconds": 10.0},
                          {"epoch": 2, "images": 1000, "training_seconds": 4.0},
                          {"epoch": 3, "images": 1000, "training_seconds": 0}]}
    ranks = {"epochs": [{"epoch": 3, "input_share": 0.2, "began": 9.0, "ended": 9.5},  # the last few kept
                        {"epoch": 2, "input_share": 0.31, "began": 5.0, "ended": 9.0}]}
    assert auto.epoch_rows(metrics, ranks) == ["epoch 1: 100 images/s, input share -",
                                               "epoch 2: 250 images/s, input share 31%",
                                               "epoch 3: 0 images/s, input share 20%"]
