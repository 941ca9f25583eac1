"""The environment TensorFlow reads once, at its import, as every process of a trainer wants it (a rank or a
parameter-server job's server): set before the import, a value the user set winning."""

from __future__ import annotations

import os


def set_defaults() -> None:
    # Keras 3 cannot run `model.fit` under MultiWorkerMirroredStrategy and has no ParameterServerStrategy support:
    # tf-keras (training/keras.py), and `tf.keras` means it for any user code too.
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up chatter hides our progress lines
    # oneDNN kernels are TensorFlow's default only on CPUs with AVX512-VNNI or newer; on an AVX2 CPU they
    # trained the default CNN about 2x faster, with the same accuracy (BENCHMARKS.md). 0 turns them off.
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
