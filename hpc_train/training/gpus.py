"""What a task says when Slurm gave it GPUs that this TensorFlow cannot use."""

from __future__ import annotations

import os

from hpc_train.bootstrap.devices import cpu_fallback_note
from hpc_train.bootstrap.tfimport import tensorflow


def gpus_unused_note() -> str | None:
    """The line a task says once when Slurm gave it GPUs that this TensorFlow cannot use (a CPU build or no
    driver), so that it computes on the CPU: said rather than left to the C++ start-up noise
    (bootstrap/stderr_filter.py). TensorFlow as this process imported it: with Keras on a rank, without on a server."""
    visible = tensorflow().config.list_physical_devices("GPU")
    return cpu_fallback_note(os.environ.get("CUDA_VISIBLE_DEVICES"), len(visible))
