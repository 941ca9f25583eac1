"""Calling `hpc-train` in-process, the way tests do."""

from __future__ import annotations

import pytest

from hpc_train.cli import main


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `hpc-train ARGS`, argparse's own exits included."""
    try:
        code = main(args)
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err
