"""TensorFlow imported at the least start-up cost: a trainer's ranks (before their task module) and the data service's
servers import it here.

`import tensorflow` imports Keras eagerly (TensorFlow's __init__ loads Keras' optimizers), and Keras then imports
what it finds installed, whether a rank uses it or not: pandas (tf-keras, for DataFrames in fit()), SciPy's linear
algebra and image filters (tf-keras, for ImageDataGenerator's transforms), scikit-learn and matplotlib (Keras 3).
MLflow and Optuna install them all. Each TensorFlow process paid for them in CPU seconds at its start, and a job
starts one per rank, per attempt, per retry (BENCHMARKS.md, "What a TensorFlow process's start costs"):

- a trainer's rank (`with_keras=True`) gets tf-keras (training/keras.py sets TF_USE_LEGACY_KERAS first, and says
  why), pandas and SciPy kept out while Keras loads: code that imports them later gets them, and ImageDataGenerator's
  transforms get SciPy at their first use, but tf-keras' `fit()` takes no DataFrame (the trainer gives it datasets);
  where a user's TF_USE_LEGACY_KERAS says Keras 3, TensorFlow is imported as it comes (`tensorflow.keras` is a
  package only when Keras loads with TensorFlow);
- a process that needs no Keras (a data service's servers) gets TensorFlow without Keras at all: TensorFlow skips
  its eager load of Keras when Keras cannot be imported (the `tf.keras` attribute still loads it at first use; an
  import from `tensorflow.keras` fails), and keeps its own log level (a server's warnings are worth reading).

Either way Python's cyclic garbage collector is paused while TensorFlow loads, and what loaded is frozen out of its
reach after (`collector_paused`): the ~330,000 objects of TensorFlow's and Keras' modules stay for the process's
life, yet each of the collector's full passes walked them all, during the import and again in training. (Frozen,
they are also out of `gc.get_objects()` and `gc.get_referrers()`, which memory tools such as objgraph read.)
"""

from __future__ import annotations

import gc
import importlib.util
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

# What tf-keras imports at its start, when installed, for what the trainer never asks of it: pandas (DataFrames in
# fit()), SciPy (sparse matrices in fit(), ImageDataGenerator's transforms: 0.3-0.5 s of CPU, most of it
# linking LAPACK). A sparse matrix given to fit() loads SciPy then; the transforms get it lazily (image_transforms_lazily).
KEPT_OUT = ("pandas", "scipy")
KERAS = ("keras", "tf_keras")
IMAGE_MODULE = "tf_keras.src.preprocessing.image"


@contextmanager
def kept_out(names: tuple[str, ...]) -> Iterator[None]:
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


class OnFirstUse:
    """A module's stand-in that imports it at its first attribute use. Not put in sys.modules: TensorFlow's autograph
    reads every module there (their __file__), which would load a lazy module at the first traced function."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> object:
        if attribute == "_name" or attribute.startswith("__"):  # (a copy made without __init__; Python's own probes)
            raise AttributeError(attribute)
        return getattr(importlib.import_module(self._name), attribute)


def image_transforms_lazily() -> None:
    """tf-keras' image transforms (kept from SciPy while tf-keras loaded) find SciPy where they look for it,
    imported at their first use."""
    image = sys.modules.get(IMAGE_MODULE)
    if image is None or getattr(image, "ndimage", None) is not None or importlib.util.find_spec("scipy") is None:
        return
    image.scipy, image.linalg, image.ndimage = (OnFirstUse(name) for name in ("scipy", "scipy.linalg", "scipy.ndimage"))


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off inside; after a clean exit, everything the process holds is frozen (gc.freeze: the
    collector never walks it again; reference counting still frees it, a cycle among it is kept), and the collector
    is on as it was, whatever happened. A rank's start (one epoch of the trainer): 0.06 s in the collector instead
    of 0.6 s, the same peak memory (BENCHMARKS.md, "What a TensorFlow process's start costs"). The cycles the
    import leaves unreachable, about 1,600 objects, are frozen with it: collecting them first would cost 0.25 s."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        gc.freeze()  # (not after a failed import: a doctor that carries on keeps its half-imported modules collectable)
    finally:
        if enabled:
            gc.enable()


def tensorflow(with_keras: bool = True) -> ModuleType:
    """TensorFlow, imported (once) at the least cost: with tf-keras (a trainer's rank: TF_USE_LEGACY_KERAS is set
    before, by training/keras.py), or with no Keras at all."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    if not with_keras:
        kept = KERAS
    elif os.environ.get("TF_USE_LEGACY_KERAS", "").lower() in ("1", "true"):
        kept = KEPT_OUT
    else:  # a user's Keras 3 (TF_USE_LEGACY_KERAS=0): TensorFlow as it comes, Keras 3 whole (it takes DataFrames)
        kept = ()
    with kept_out(kept), collector_paused():
        import tensorflow as tf

        if with_keras:
            import tf_keras  # noqa: F401
    if with_keras:
        image_transforms_lazily()
    return tf
