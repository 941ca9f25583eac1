"""The one place that picks Keras: tf-keras (Keras 2), imported after TensorFlow is configured.

Keras 3 cannot run `model.fit` under MultiWorkerMirroredStrategy and has no
ParameterServerStrategy support, so the trainer uses tf-keras; setting
TF_USE_LEGACY_KERAS also makes `tf.keras` mean tf-keras for any user code.
"""

from __future__ import annotations

from hpc_train.bootstrap.tfimport import tensorflow
from hpc_train.training.tfenv import set_defaults

set_defaults()  # before TensorFlow's import: it reads them then

# tf-keras imports pandas and SciPy at its start, when they are installed (MLflow and Optuna bring them), for what the
# trainer never asks of it: kept out (bootstrap/tfimport.py; BENCHMARKS.md, start-up).
tf = tensorflow(with_keras=True)
import tf_keras as keras  # noqa: E402  # (imported by tensorflow() above)

__all__ = ["keras", "tf"]
