"""A rank's first act in an image (hpc_train/__main__.py, when HPC_TRAIN_CONTAINER is set): the job's site-packages
added after the image's own, and a TensorFlow hpc-train cannot use refused in one line naming both versions, before
the bootstrap (an import error deep in TensorFlow, or a model that silently misbehaves, would say far less)."""

from __future__ import annotations

import re
import site
import sys
from collections.abc import Callable, Mapping

from hpc_train.container.runtime import IN_CONTAINER, JOB_SITE

# The TensorFlow versions hpc-train runs with: pyproject.toml's dependency (tests/container checks they agree).
# Kept here, not read from hpc-train's metadata: in an image the package is mounted bare, without its dist-info.
TENSORFLOW_FROM = (2, 16)
TENSORFLOW_BELOW = (2, 22)
# TensorFlow's distributions by their names on PyPI (NVIDIA's images install `tensorflow`).
DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly")


def tensorflow_problem(found: str | None, ours: str, runtime: str) -> str | None:
    """The rank's one line when the image's TensorFlow (`found`, None: none) is not one hpc-train `ours` can use."""
    wanted = f">={'.'.join(map(str, TENSORFLOW_FROM))},<{'.'.join(map(str, TENSORFLOW_BELOW))}"
    if found is None:
        return (f"hpc-train {ours}: no TensorFlow in the {runtime} image (hpc-train needs TensorFlow {wanted}); use "
                "an image with one (NGC's nvcr.io#nvidia/tensorflow), or install it in the job's environment")
    numbers = tuple(int(part) for part in re.findall(r"\d+", found)[:2])
    if TENSORFLOW_FROM <= numbers < TENSORFLOW_BELOW:
        return None
    return (f"hpc-train {ours}: the {runtime} image's TensorFlow {found} is not one it can use (it needs TensorFlow "
            f"{wanted}); use an image with one, or an hpc-train made for TensorFlow {found}")


def installed_tensorflow(version: Callable[[str], str]) -> str | None:
    """The version of the TensorFlow on sys.path (`version`: importlib.metadata's), None when there is none."""
    from importlib.metadata import PackageNotFoundError

    for name in DISTRIBUTIONS:
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return None


def enter(env: Mapping[str, str]) -> str | None:
    """In an image: the job's site-packages after the image's, then the TensorFlow check: its one line when the
    rank must not go on (the caller says it and exits 2), else None, the rank's Python and TensorFlow said."""
    from importlib.metadata import version

    from hpc_train.version import __version__

    if env.get(JOB_SITE):
        site.addsitedir(env[JOB_SITE])  # appended: the image's own packages come first
    runtime = env.get(IN_CONTAINER, "container")
    found = installed_tensorflow(version)
    problem = tensorflow_problem(found, __version__, runtime)
    if problem:
        return problem
    # Which Python and TensorFlow the rank runs, in its log: the image's, or the job's where the image has none.
    print(f"hpc-train: in the {runtime} image: Python {sys.version.split()[0]}, TensorFlow {found}", file=sys.stderr,
          flush=True)
    return None
