"""hpc-train: distributed TensorFlow training on Slurm clusters.

Importing this package is cheap on purpose: nothing here imports TensorFlow,
so the command line starts fast on a login node.

This is the package's public face alone: the version and protocol (kept in hpc_train/version.py, which the rest
of the package imports), `fit` and `report`, each importing what it needs when called. No module of the package
imports this one.
"""

from hpc_train.version import OLDEST_PROTOCOL, PROTOCOL, UNKNOWN_VERSION, __version__, installed_version, version_line

__all__ = ["OLDEST_PROTOCOL", "PROTOCOL", "UNKNOWN_VERSION", "__version__", "fit", "installed_version", "report",
           "version_line"]


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
