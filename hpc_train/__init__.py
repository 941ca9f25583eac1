"""hpc-train: distributed TensorFlow training on Slurm clusters.

Importing this package is cheap on purpose: nothing here imports TensorFlow,
so the command line starts fast on a login node.
"""

__version__ = "0.1.0"
