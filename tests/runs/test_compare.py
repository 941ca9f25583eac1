"""The sweep plot that `report` draws: curves named by their values, log axes for powers of ten, ties visible."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.runs.compare import Element, curve_label, draw, log_axis, plot, tied_points

plt = pytest.importorskip("matplotlib.pyplot")


def element(index: int, learning_rate: float, accuracies: list[float], optimizer: str = "adam") -> Element:
    return Element(index, {"learning_rate": learning_rate, "optimizer": optimizer}, "COMPLETED",
                   [{"epoch": epoch, "val_accuracy": value} for epoch, value in enumerate(accuracies, 1)])


# Elements 0 and 2 are the same run (a tie); the learning rates span two powers of ten.
ELEMENTS = [element(0, 0.01, [0.9, 0.95]), element(1, 0.0001, [0.5, 0.7], "sgd"), element(2, 0.01, [0.9, 0.95])]
KEYS = ["learning_rate", "optimizer"]


def test_each_curve_is_named_by_its_values_not_its_index() -> None:
    figure = draw(plt, ELEMENTS, KEYS, "val_accuracy")
    labels = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert labels == ["learning_rate=0.01, optimizer=adam", "learning_rate=0.0001, optimizer=sgd",
                      "learning_rate=0.01, optimizer=adam"]
    assert curve_label(Element(3, {}, "RUNNING"), []) == "element 3"
    plt.close(figure)


def test_tied_curves_keep_styles_of_their_own() -> None:
    figure = draw(plt, ELEMENTS, KEYS, "val_accuracy")
    first, _, third = figure.axes[0].get_lines()
    assert (first.get_linestyle(), first.get_marker()) != (third.get_linestyle(), third.get_marker())
    plt.close(figure)


def test_a_key_over_powers_of_ten_gets_a_log_axis_and_ties_say_how_many() -> None:
    figure = draw(plt, ELEMENTS, KEYS, "val_accuracy")
    rate_axis, optimizer_axis = figure.axes[1], figure.axes[2]
    assert rate_axis.get_xscale() == "log" and optimizer_axis.get_xscale() == "linear"
    assert [text.get_text() for text in rate_axis.texts] == ["x2"]  # the two equal runs, drawn once, counted
    assert [label.get_text() for label in optimizer_axis.get_xticklabels()] == ["adam", "sgd"]
    plt.close(figure)


def test_the_pure_rules() -> None:
    assert log_axis([0.01, 0.001]) and not log_axis([1, 2, 4]) and not log_axis([0, 10]) and not log_axis([])
    assert tied_points([(1, 0.5), (2, 0.6), (1, 0.5)]) == [(1, 0.5, 2), (2, 0.6, 1)]


def test_plot_writes_a_png(tmp_path: Path) -> None:
    assert plot(ELEMENTS, KEYS, "val_accuracy", tmp_path / "sweep.png")
    assert (tmp_path / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
