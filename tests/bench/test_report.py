"""What every benchmark shares: medians with min-max, Markdown tables, its own section of BENCHMARKS.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.bench import report
from hpc_train.bench.report import spread, summary, table, write_section


def test_summary_is_median_min_max_scaled() -> None:
    assert summary([3.0, 1.0, 2.0, 10.0], scale=1000) == (2500.0, 1000.0, 10000.0)


def test_spread_formats_with_thousands_separators() -> None:
    assert spread([1234.5, 2000.0, 900.0]) == ("1,234", "900-2,000")
    assert spread([0.91, 0.95, 0.93], 1, scale=100) == ("93.0", "91.0-95.0")


def test_table_right_aligns_every_column_but_the_first() -> None:
    assert table(("run", "images/s"), [("seed", "1,000")]) == ["| run | images/s |", "|---|---:|",
                                                                "| seed | 1,000 |"]
    assert table(("a", "b", "c"), [], "llr")[1] == "|---|---|---:|"


def test_a_section_is_replaced_in_place_and_the_others_are_kept(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    markdown = tmp_path / "BENCHMARKS.md"
    monkeypatch.setattr(report, "BENCHMARKS_MD", markdown)
    write_section("trainer", "## Trainer\n\nold")
    write_section("scaling", "## Scaling\n\nfigures")
    write_section("trainer", "## Trainer\n\nnew")
    text = markdown.read_text()
    assert text.startswith("# Benchmarks\n")
    assert "old" not in text and text.count("## Trainer") == 1 and "figures" in text
    assert text.index("new") < text.index("## Scaling")  # replaced where it was, not appended


def test_interleaved_runs_reverse_their_order_every_other_repetition() -> None:
    order: list[str] = []
    runs = {name: (lambda name=name: order.append(name) or float(len(order))) for name in ("a", "b", "c")}
    samples = report.interleaved(runs, 3, str)
    assert order == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]
    assert samples == {"a": [1.0, 6.0, 7.0], "b": [2.0, 5.0, 8.0], "c": [3.0, 4.0, 9.0]}


def test_publish_draws_its_plots_only_when_it_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    markdown = tmp_path / "BENCHMARKS.md"
    monkeypatch.setattr(report, "BENCHMARKS_MD", markdown)
    drawn: list[str] = []
    report.publish("trainer", "## Trainer\n\nquick", False, lambda: drawn.append("quick"))
    assert drawn == [] and not markdown.exists() and "quick" in capsys.readouterr().out
    report.publish("trainer", "## Trainer\n\nfull", True, lambda: drawn.append("one"), lambda: drawn.append("two"))
    assert drawn == ["one", "two"] and "full" in markdown.read_text()


def test_a_benchmarks_command_line_has_its_counts_and_the_data_directory() -> None:
    args = report.parsed("sweeps", "doc", ["--trials", "3", "--data-dir", "/d"], repetitions=1, data_dir=True,
                         trials=8, epochs=6)
    assert (args.repetitions, args.quick, args.trials, args.epochs, args.data_dir) == (1, False, 3, 6, Path("/d"))
    assert not hasattr(report.parsed("submit", "doc", [], repetitions=9), "data_dir")


def test_a_section_opens_with_its_title_and_the_machine() -> None:
    assert report.opening("Submitting", "; Slurm: local.") == ["## Submitting", "",
                                                                f"Machine: {report.machine()}; Slurm: local."]
