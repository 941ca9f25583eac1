"""hpc-train: distributed TensorFlow training on Slurm clusters.

Importing this package is cheap on purpose: nothing here imports TensorFlow,
so the command line starts fast on a login node.
"""

import os

UNKNOWN_VERSION = "0+unknown"  # a checkout never built nor installed: no version.txt beside this file
# What a laptop's hpc-train may ask of a login node's over --remote (hpc_train/remote/protocol.py says what each
# verb needs). Bump it when a forwarded verb gains an option or a behaviour the laptop relies on; builds before
# protocol 1 report none. 1: submit --in-snapshot (submit --remote), and every verb as of issue 36. 2: submit
# --partition A,B (Slurm's list, each partition checked by preflight; issue 37).
PROTOCOL = 2
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


def fit(*args, **kwargs):  # type: ignore[no-untyped-def]
    """Train a model from Python with every guarantee of `hpc-train train` (see hpc_train.training.fit.fit)."""
    from hpc_train.training.fit import fit as fit_now

    return fit_now(*args, **kwargs)


def report(epoch, value):  # type: ignore[no-untyped-def]
    """From your own command in a sweep: its objective at the end of `epoch`; True when the sweep's pruner stops
    this trial (save, then exit 0: the trial is already PRUNED). Rank 0 reports, the others get False; outside a
    sweep element with a trial, always False (see hpc_train.runs.study.report_from_command)."""
    import os

    from hpc_train.runs.study import report_from_command

    return report_from_command(int(epoch), float(value), os.environ)
