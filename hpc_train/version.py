"""Which hpc-train this is: its name in log lines, its version and the protocol it speaks to a laptop.

Standard library only, at the bottom of the layers: every side of a job (the command line, a job body, a rank,
a container's check, a login node's answer to a laptop) reads it without importing anything else of hpc-train.
"""

import os

# How hpc-train signs the lines it writes to a job's log ("hpc-train: job 42 on ..."), wherever it runs.
PREFIX = "hpc-train"

UNKNOWN_VERSION = "0+unknown"  # a checkout never built nor installed: no version.txt beside this file
# What a laptop's hpc-train may ask of a login node's over --remote (hpc_train/remote/protocol.py says what each
# verb needs). Bump it when a forwarded verb gains an option or a behaviour the laptop relies on; builds before
# protocol 1 report none. 1: submit --in-snapshot (submit --remote), and every verb as of issue 36. 2: submit
# --partition A,B (Slurm's list, each partition checked by preflight; issue 37). 3: logs --job (the job's own log;
# issue 46).
PROTOCOL = 3
OLDEST_PROTOCOL = 1  # the oldest laptop's protocol this login-side hpc-train still serves


def installed_version() -> str:
    """The version this build was made as (setuptools-scm writes version.txt from git: docs/development.md)."""
    try:
        with open(os.path.join(os.path.dirname(__file__), "version.txt"), encoding="utf-8") as file:
            return file.read().strip() or UNKNOWN_VERSION
    except OSError:
        return UNKNOWN_VERSION


__version__ = installed_version()


def version_line() -> str:
    """What `hpc-train --version` prints, and a login node's answers to a laptop's probe (remote/protocol.py)."""
    return f"hpc-train {__version__} (protocol {PROTOCOL}, oldest {OLDEST_PROTOCOL})"
