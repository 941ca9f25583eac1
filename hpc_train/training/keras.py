"""The one place that picks Keras: tf-keras (Keras 2), imported after TensorFlow is configured.

Keras 3 cannot run `model.fit` under MultiWorkerMirroredStrategy and has no
ParameterServerStrategy support, so the trainer uses tf-keras; setting
TF_USE_LEGACY_KERAS also makes `tf.keras` mean tf-keras for any user code.
"""

from __future__ import annotations

import os

from hpc_train.bootstrap.tfimport import tensorflow

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up chatter hides our progress lines
# oneDNN kernels are TensorFlow's default only on CPUs with AVX512-VNNI or newer; on an AVX2 CPU they
# trained the default CNN about 2x faster, with the same accuracy (BENCHMARKS.md). 0 turns them off.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")


# tf-keras imports pandas and SciPy at its start, when they are installed (MLflow and Optuna bring them), for what the
# trainer never asks of it: kept out (bootstrap/tfimport.py; BENCHMARKS.md, start-up).
tf = tensorflow(with_keras=True)
import tf_keras as keras  # noqa: E402  # (imported by tensorflow() above)

__all__ = ["keras", "tf"]
