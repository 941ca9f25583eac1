"""The `hpc-train` entry point itself."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hpc_train import OLDEST_PROTOCOL, PROTOCOL, __version__
from hpc_train.cli import split_command
from tests.cli.running import run_main


def test_help_lists_the_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["--help"], capsys)
    assert code == 0
    assert "bootstrap" in out and "export TF_CONFIG" in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    said = f"hpc-train {__version__} (protocol {PROTOCOL}, oldest {OLDEST_PROTOCOL})\n"
    assert run_main(["--version"], capsys)[:2] == (0, said)


@pytest.mark.parametrize("args, words", [
    ([], "the following arguments are required: SUBCOMMAND"),
    (["launch-rockets"], "invalid choice: 'launch-rockets'"),
    (["bootstrap", "--port-base", "high"], "argument --port-base: invalid int value: 'high'"),
    # (issue 46, 5) an ambiguous abbreviation names the options it could be
    (["submit", "--study", "x"], "ambiguous option: --study could match --study-storage, --study-name"),
])
def test_usage_errors_are_one_line_and_exit_2(args: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(args, capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert words in err and "--help)" in err


def test_a_bad_columns_variable_does_not_break_help(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "wide")
    assert run_main(["bootstrap", "--help"], capsys)[0] == 0


def test_the_command_after_the_first_double_dash_is_left_untouched() -> None:
    assert split_command(["bootstrap", "--", "python", "--", "-x"]) == (["bootstrap"], ["python", "--", "-x"])
    assert split_command(["bootstrap", "--print"]) == (["bootstrap", "--print"], None)


def test_a_reader_that_leaves_early_ends_the_output_quietly() -> None:
    # `hpc-train list | head`: the reader has closed the pipe before the output is written.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        ended = subprocess.run([sys.executable, "-m", "hpc_train", "render", "--nodes", "2"], stdout=write_end,
                               stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert (ended.returncode, ended.stderr) == (141, "")  # as a Unix tool killed by SIGPIPE, and no traceback
