"""The one exception type users see, and how it reads."""

from __future__ import annotations

import sys

from hpc_train.exitcodes import EXIT_REFUSED


class HpcTrainError(Exception):
    """A problem with the user's input or environment, with its fix.

    The command line prints the message as one line and exits 2; it never shows
    a traceback for these.
    """


class SlurmEnvError(HpcTrainError):
    """A Slurm variable is missing or holds a value hpc-train cannot use.

    The message names the variable, echoes its value and says what would fix it:
    ``SLURM_PROCID='7': out of range for 4 tasks (0-3); run the command under srun``.
    """

    def __init__(self, variable: str, value: str | None, problem: str, fix: str) -> None:
        shown = " is not set" if value is None else f"={value!r}"
        super().__init__(f"{variable}{shown}: {problem}; {fix}")
        self.variable = variable
        self.value = value


def one_line(error: BaseException) -> str:
    """Any exception as one line, "Type: its first line" (SQLAlchemy's, for one, add lines of background)."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else 'no detail'}"


def report(error: HpcTrainError, prefix: str) -> int:
    """Print an error as users see it: the user's own traceback when it has one, then one line; the exit code."""
    details = getattr(error, "details", "")  # a user function's traceback, through the user's frames only
    if details:
        print(details, file=sys.stderr)
    print(f"{prefix}: error: {error}", file=sys.stderr, flush=True)
    return getattr(error, "exit_code", EXIT_REFUSED)
