"""hpc-train: distributed TensorFlow training on Slurm clusters.

Importing this package is cheap on purpose: nothing here imports TensorFlow,
so the command line starts fast on a login node.
"""

__version__ = "0.1.0"


def fit(*args, **kwargs):  # type: ignore[no-untyped-def]
    """Train a model from Python with every guarantee of `hpc-train train` (see hpc_train.training.fit.fit)."""
    from hpc_train.training.fit import fit as fit_now

    return fit_now(*args, **kwargs)
