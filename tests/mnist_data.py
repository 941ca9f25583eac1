"""Where the real MNIST files are for tests: ../shared/data/mnist beside the project."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_MNIST = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mnist"


def shared_mnist() -> Path:
    """The directory, or skip the test on a machine without it (never in CI, where it must be)."""
    if not (SHARED_MNIST / "t10k-images-idx3-ubyte.gz").is_file():
        if os.environ.get("CI"):
            pytest.fail(f"CI must have the shared MNIST files at {SHARED_MNIST}")
        pytest.skip(f"no MNIST at {SHARED_MNIST}")
    return SHARED_MNIST
