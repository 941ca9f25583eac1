"""The one place that picks Keras: tf-keras (Keras 2), imported after TensorFlow is configured.

Keras 3 cannot run `model.fit` under MultiWorkerMirroredStrategy and has no
ParameterServerStrategy support, so the trainer uses tf-keras; setting
TF_USE_LEGACY_KERAS also makes `tf.keras` mean tf-keras for any user code.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up chatter hides our progress lines
# oneDNN kernels are TensorFlow's default only on CPUs with AVX512-VNNI or newer; on an AVX2 CPU they
# trained the default CNN about 2x faster, with the same accuracy (BENCHMARKS.md). 0 turns them off.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")


@contextmanager
def _kept_out(*names: str) -> Iterator[None]:
    """Imports of these modules fail inside (ImportError), unless they are imported already; as before after."""
    absent = [name for name in names if name not in sys.modules]
    for name in absent:
        sys.modules[name] = None  # type: ignore[assignment]  # (Python's own way to make an import fail)
    try:
        yield
    finally:
        for name in absent:
            if sys.modules.get(name, ...) is None:
                del sys.modules[name]


# tf-keras imports pandas, when it is installed (MLflow brings it), to take DataFrames in fit(), which the trainer
# never gives it: 5% of every rank's import of TensorFlow (0.2 s of CPU; BENCHMARKS.md, start-up). Kept out while
# tf-keras loads; code that imports pandas itself (a task module, MLflow) still gets it.
with _kept_out("pandas"):
    import tensorflow as tf  # noqa: E402
    import tf_keras as keras  # noqa: E402

__all__ = ["keras", "tf"]
