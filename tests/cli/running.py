"""Calling `hpc-train` in-process, the way tests do."""

from __future__ import annotations

import os

import pytest

from hpc_train.cli import main


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `hpc-train ARGS`, argparse's own exits included. TensorFlow's start-up lines
    are not filtered: the filter would fork this very process and reroute the test session's own stderr."""
    from hpc_train.bootstrap.stderr_filter import SHOW_VARIABLE

    before = os.environ.get(SHOW_VARIABLE)
    os.environ[SHOW_VARIABLE] = "1"
    try:
        code = main(args)
    except SystemExit as exit_:
        code = exit_.code
    finally:
        if before is None:
            del os.environ[SHOW_VARIABLE]
        else:
            os.environ[SHOW_VARIABLE] = before
    captured = capsys.readouterr()
    return code, captured.out, captured.err
