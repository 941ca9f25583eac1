"""Aligned columns and values as the tables show them."""

from __future__ import annotations

from hpc_train.runs.columns import aligned, value_text


def test_each_column_is_as_wide_as_its_widest_cell_and_rows_end_without_spaces() -> None:
    assert aligned([["INDEX", "lr", "STATE"], ["0", "0.001", "running"], ["10", "0.1", "-"]]) == [
        "INDEX  lr     STATE", "0      0.001  running", "10     0.1    -"]


def test_floats_show_six_significant_digits_anything_else_as_it_prints() -> None:
    assert value_text(0.1 + 0.2) == "0.3" and value_text(1234567.0) == "1.23457e+06"
    assert value_text(32) == "32" and value_text("adam") == "adam" and value_text(None) == "None"
