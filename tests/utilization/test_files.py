"""Where samples are kept: a removed run folder is never made again; lines cut short are skipped; registrations
of another attempt's step are not this one's."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.utilization import files


def test_a_removed_run_folder_is_not_made_again(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        files.append_row(tmp_path / "gone", "node1", {"t": 1.0, "node": "node1"})
    assert not (tmp_path / "gone").exists()


def test_a_line_cut_short_or_not_a_sample_is_skipped() -> None:
    lines = ['{"t": 1.0, "node": "n", "gpus": []}', '{"t": 2.0, "node": "n", "gp', '[1]', '{"node": "n"}',
             '{"t": 3.0, "node": "n", "gpus": 7}']
    assert list(files.parse_rows(lines)) == [{"t": 1.0, "node": "n", "gpus": []}]


def test_only_this_attempts_registrations_are_read(tmp_path: Path) -> None:
    files.register_rank(tmp_path, "node1", files.RankEntry(0, 10, ("0",), "7.0.0"))
    files.register_rank(tmp_path, "node1", files.RankEntry(1, 11, None, "7.0.1"))
    files.register_rank(tmp_path, "node2", files.RankEntry(2, 12, (), "7.0.1"))
    assert files.node_ranks(tmp_path, "node1", "7.0.1") == [files.RankEntry(1, 11, None, "7.0.1")]
