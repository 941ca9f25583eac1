"""metrics.json: written whole, read back, and what a reader gets from a missing, damaged or odd file."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.runs.metrics import UnreadableMetrics, epochs, metrics_path, read_metrics, totals, write_metrics


def test_the_figures_are_written_whole_and_read_back(tmp_path: Path) -> None:
    figures = {"task": "mnist", "epochs": [{"epoch": 1, "loss": 0.5}, {"epoch": 2, "loss": 0.25}],
               "totals": {"epochs": 2, "seconds": 3.5}}
    write_metrics(tmp_path, figures)
    assert read_metrics(tmp_path) == read_metrics(tmp_path, strict=True) == figures
    assert epochs(tmp_path) == figures["epochs"] and totals(tmp_path) == {"epochs": 2, "seconds": 3.5}
    assert metrics_path(tmp_path) == tmp_path / "metrics.json"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["metrics.json"]  # no partial file left


def test_a_run_without_figures_yet_reads_as_none_strict_or_not(tmp_path: Path) -> None:
    assert read_metrics(tmp_path) == read_metrics(tmp_path, strict=True) == {}
    assert epochs(tmp_path) == [] and totals(tmp_path) == {}


@pytest.mark.parametrize("text, why", [('{"epochs": [', "Expecting"), ("[1, 2]", "not a JSON object")])
def test_an_unreadable_file_is_none_or_if_strict_says_which_file_and_why(tmp_path: Path, text: str,
                                                                          why: str) -> None:
    metrics_path(tmp_path).write_text(text)
    assert read_metrics(tmp_path) == {} and epochs(tmp_path) == [] and totals(tmp_path) == {}
    with pytest.raises(UnreadableMetrics, match=why) as raised:
        read_metrics(tmp_path, strict=True)
    assert str(raised.value).startswith(f"{metrics_path(tmp_path)}: ")


def test_epochs_and_totals_of_the_wrong_shape_read_as_none(tmp_path: Path) -> None:
    write_metrics(tmp_path, {"epochs": [{"epoch": 1}, "two", 3], "totals": [1]})
    assert epochs(tmp_path) == [{"epoch": 1}] and totals(tmp_path) == {}
    write_metrics(tmp_path, {"epochs": {"epoch": 1}})
    assert epochs(tmp_path) == []
