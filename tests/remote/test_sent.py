"""Where this laptop sent its jobs (remote/sent.py): a bare id is its latest submission's remote."""

from __future__ import annotations

import stat
from pathlib import Path

from hpc_train.remote.sent import HERE, list_lines, memory_file, parse, remember, where


def test_a_bare_id_follows_its_latest_submission(tmp_path: Path) -> None:
    environ = {"XDG_CONFIG_HOME": str(tmp_path)}
    assert where("1234", environ) is None
    remember("1234", "a", environ)
    remember("77", "b", environ)
    assert where("1234", environ) == "a" and where("77_3", environ) == "b" and where("78", environ) is None
    remember("1234", "b", environ)  # the other cluster's job 1234, sent later
    assert where("1234", environ) == "b"
    remember("1234", HERE, environ, only_if_kept=True)  # then this machine's own Slurm gave a job that id
    assert where("1234", environ) is None
    path = memory_file(environ)
    assert path == tmp_path / "hpc-train" / "jobs.json" and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [line.split()[:2] for line in list_lines(environ)[1:]] == [["1234", "b"], ["77", "b"], ["1234", "a"]]


def test_a_machine_that_never_sent_a_job_keeps_no_file(tmp_path: Path) -> None:
    environ = {"XDG_CONFIG_HOME": str(tmp_path)}
    remember("5", HERE, environ, only_if_kept=True)
    assert not memory_file(environ).exists() and list_lines(environ) == []


def test_a_file_that_is_not_ours_reads_as_nothing() -> None:
    assert parse("not json") == [] and parse('{"jobs": 3}') == [] and parse("[]") == []
    assert [row.job for row in parse('{"jobs": [{"job": 5, "remote": "a"}, {"remote": "b"}]}')] == ["5"]
