"""How Slurm's commands reach Slurm: a transport runs one argv and answers as `subprocess.run` would.

`LocalTransport` runs it here, as a subprocess. A transport for a cluster seen
from elsewhere (ssh to a login node) runs the same argv there; so the client
above hands a transport only argv, environment, stdin and a working folder,
and asks the transport, not this machine's PATH, whether a command is there.

A transport never raises for a command that is missing or does not answer:
that is a failed run whose stderr says why (exit code NOT_FOUND or TIMED_OUT).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

# A run's exit code when the command did not answer within its timeout, or could not be started (as the shell's).
TIMED_OUT, NOT_FOUND = 124, 127


class Transport(Protocol):
    """Runs a command where Slurm is; what SlurmClient needs of it."""

    def run(self, argv: Sequence[str], env: Mapping[str, str] | None, timeout: float, stdin: str | None = None,
            cwd: str | os.PathLike[str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run argv (env None: the transport's own environment); a failed run, never an exception."""
        ...

    def has(self, command: str, env: Mapping[str, str] | None) -> bool:
        """Whether `command` is on the PATH the transport runs commands with."""
        ...

    def start(self, argv: Sequence[str], env: Mapping[str, str] | None,
              piped: bool = False) -> subprocess.Popen[bytes]:
        """Start argv without waiting for it, its output the caller's (a job's step, inside the job), or with
        `piped` its stdout and stderr together in the process's stdout, to read as it comes."""
        ...


def timed_out(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """The run of a command that did not answer within `timeout` seconds."""
    return subprocess.CompletedProcess(list(argv), TIMED_OUT, "", f"{argv[0]} did not answer within {timeout:.0f} s")


def not_started(argv: Sequence[str], reason: str) -> subprocess.CompletedProcess[str]:
    """The run of a command that could not be started."""
    return subprocess.CompletedProcess(list(argv), NOT_FOUND, "", f"cannot run {argv[0]}: {reason}")


@dataclass(frozen=True)
class LocalTransport:
    """Runs Slurm's commands on this machine, as subprocesses."""

    def run(self, argv: Sequence[str], env: Mapping[str, str] | None, timeout: float, stdin: str | None = None,
            cwd: str | os.PathLike[str] | None = None) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(list(argv), env=None if env is None else dict(env), input=stdin,
                                  capture_output=True, text=True, timeout=timeout, cwd=cwd)
        except subprocess.TimeoutExpired:
            return timed_out(argv, timeout)
        except OSError as error:
            return not_started(argv, error.strerror or str(error))

    def has(self, command: str, env: Mapping[str, str] | None) -> bool:
        path = None if env is None else env.get("PATH")  # None: this process's PATH
        return shutil.which(command, path=path) is not None

    def start(self, argv: Sequence[str], env: Mapping[str, str] | None,
              piped: bool = False) -> subprocess.Popen[bytes]:
        output = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT} if piped else {}
        return subprocess.Popen(list(argv), env=None if env is None else dict(env), **output)
