"""MNIST from disk, verified: IDX .gz files, a Keras mnist.npz, or Keras' own cache.

NumPy only; nothing here downloads (that is `hpc-train data fetch`, on a
machine with internet) and nothing imports TensorFlow.

Splits: validation is always the last `validation_images` of MNIST's test set.
Training uses MNIST's 60,000 training images when they are there; when only the
test set is (as in a small staged copy), it uses the test images before the
validation ones, e.g. 8,000 for training and 2,000 for validation.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hpc_train.errors import HpcTrainError

TRAIN_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz")
TEST_FILES = ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
NPZ_NAME = "mnist.npz"
COUNTS = {"train": 60_000, "test": 10_000}
IMAGE_SIDE = 28
IMAGES_MAGIC, LABELS_MAGIC = 2051, 2049

# SHA-256 of the files as published (the IDX files from MNIST's site, mnist.npz from Keras).
KNOWN_SHA256 = {
    "t10k-images-idx3-ubyte.gz": "167310007f03058885c7e95e6c0b19c20de5c7fd3031f4cbdadc9014a523d80b",
    "t10k-labels-idx1-ubyte.gz": "fc607395669ec21321ea83e4b82c0544b7e8e63ff5b34337c06bc0a17cc0da3c",
    "train-labels-idx1-ubyte.gz": "ec02e7948609e5754d47881c09b8afdd8dfa60600b9e5388c8c54a67069ec772",
    NPZ_NAME: "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1",
}


class DataError(HpcTrainError):
    """MNIST is missing, corrupt, or cannot give the split asked for."""


@dataclass(frozen=True)
class MnistSplits:
    train_images: np.ndarray  # uint8, (n, 28, 28)
    train_labels: np.ndarray  # uint8, (n,)
    validation_images: np.ndarray
    validation_labels: np.ndarray
    source: str  # where the images came from, for the log


def keras_cache_file(env: Mapping[str, str] = os.environ) -> Path:
    """Where Keras keeps mnist.npz: $KERAS_HOME/datasets, else ~/.keras/datasets."""
    home = Path(env["KERAS_HOME"]) if env.get("KERAS_HOME") else Path.home() / ".keras"
    return home / "datasets" / NPZ_NAME


def staging_hint(directory: str = "DIR") -> str:
    return (f"stage it on a machine with internet (a login node) with `hpc-train data fetch --dest {directory}`, "
            f"then pass --data-dir {directory}")


def load_mnist(data_dir: str | Path | None, train_images: int | None = None,
               validation_images: int = 2000) -> MnistSplits:
    """Find, read, verify and split MNIST (see the module docstring)."""
    train, test, source = _read_source(data_dir)
    return _split(train, test, train_images, validation_images, source)


def _read_source(data_dir: str | Path | None) -> tuple[tuple[np.ndarray, np.ndarray] | None,
                                                       tuple[np.ndarray, np.ndarray], str]:
    if data_dir is None:
        cached = keras_cache_file()
        if not cached.is_file():
            raise DataError(f"no MNIST: no --data-dir given and no Keras cache at {cached}; {staging_hint()}")
        return (*_read_npz(cached), str(cached))
    directory = Path(data_dir)
    if not directory.is_dir():
        raise DataError(f"--data-dir {str(directory)!r} is not a directory; {staging_hint()}")
    if all((directory / name).is_file() for name in TEST_FILES):
        train = _read_idx_pair(directory, TRAIN_FILES, "train") if all(
            (directory / name).is_file() for name in TRAIN_FILES) else None
        return train, _read_idx_pair(directory, TEST_FILES, "test"), f"{directory} (IDX)"
    if (directory / NPZ_NAME).is_file():
        return (*_read_npz(directory / NPZ_NAME), str(directory / NPZ_NAME))
    raise DataError(f"no MNIST in {directory}: expected {TEST_FILES[0]} and {TEST_FILES[1]} (IDX, gzip) or "
                    f"{NPZ_NAME}; {staging_hint(str(directory))}")


def _read_idx_pair(directory: Path, names: tuple[str, str], part: str) -> tuple[np.ndarray, np.ndarray]:
    images = _read_idx(directory / names[0], IMAGES_MAGIC, COUNTS[part])
    labels = _read_idx(directory / names[1], LABELS_MAGIC, COUNTS[part])
    return images, labels


def _read_idx(path: Path, magic: int, count: int) -> np.ndarray:
    """One IDX file, checked: checksum when known, header, size, label range."""
    raw = _verified_bytes(path)
    try:
        data = gzip.decompress(raw)
    except (OSError, EOFError) as error:
        raise DataError(f"{path}: not a readable gzip file ({error}); fetch it again") from None
    dimensions = 3 if magic == IMAGES_MAGIC else 1
    header_size = 4 + 4 * dimensions
    if len(data) < header_size:
        raise DataError(f"{path}: too short for an IDX header; fetch it again")
    found_magic, *shape = struct.unpack(f">{1 + dimensions}I", data[:header_size])
    expected_shape = [count, IMAGE_SIDE, IMAGE_SIDE] if dimensions == 3 else [count]
    if found_magic != magic or shape != expected_shape:
        raise DataError(f"{path}: IDX header says magic {found_magic}, shape {shape}; expected magic {magic}, "
                        f"shape {expected_shape} (is it the right MNIST file?)")
    values = np.frombuffer(data, dtype=np.uint8, offset=header_size)
    if values.size != int(np.prod(expected_shape)):
        raise DataError(f"{path}: holds {values.size} values, expected {int(np.prod(expected_shape))}; "
                        "the file is truncated: fetch it again")
    array = values.reshape(expected_shape)
    if dimensions == 1:
        _check_labels(path, array)
    return array


def _read_npz(path: Path) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    _verified_bytes(path)
    try:
        with np.load(path, allow_pickle=False) as arrays:
            train = (arrays["x_train"], arrays["y_train"])
            test = (arrays["x_test"], arrays["y_test"])
    except (OSError, KeyError, ValueError) as error:
        raise DataError(f"{path}: not a Keras MNIST npz ({error}); fetch it again") from None
    for part, (images, labels) in (("train", train), ("test", test)):
        if images.shape != (COUNTS[part], IMAGE_SIDE, IMAGE_SIDE) or labels.shape != (COUNTS[part],):
            raise DataError(f"{path}: {part} arrays have shapes {images.shape} and {labels.shape}, expected "
                            f"({COUNTS[part]}, 28, 28) and ({COUNTS[part]},); fetch it again")
        _check_labels(path, labels)
    return train, test


def _verified_bytes(path: Path) -> bytes:
    raw = path.read_bytes()
    expected = KNOWN_SHA256.get(path.name)
    if expected is not None:
        actual = hashlib.sha256(raw).hexdigest()
        if actual != expected:
            raise DataError(f"{path}: SHA-256 {actual[:12]}... differs from the published {expected[:12]}...; "
                            "the file is corrupt or not MNIST: fetch it again")
    return raw


def _check_labels(path: Path, labels: np.ndarray) -> None:
    if labels.size and int(labels.max()) > 9:
        raise DataError(f"{path}: holds label {int(labels.max())}, MNIST labels are 0-9; fetch it again")


def _split(train: tuple[np.ndarray, np.ndarray] | None, test: tuple[np.ndarray, np.ndarray],
           train_images: int | None, validation_images: int, source: str) -> MnistSplits:
    test_images, test_labels = test
    if validation_images >= len(test_images) and train is None:
        raise DataError(f"validation_images: {validation_images} leaves no training image of the "
                        f"{len(test_images)} there are; lower it (e.g. 2000)")
    if validation_images > len(test_images):
        raise DataError(f"validation_images: {validation_images} is more than the {len(test_images)} test images")
    cut = len(test_images) - validation_images
    pool_images, pool_labels = train if train is not None else (test_images[:cut], test_labels[:cut])
    if train_images is not None and train_images > len(pool_images):
        raise DataError(f"train_images: {train_images} asked, {len(pool_images)} there "
                        f"({'training set' if train is not None else 'test set less validation'}); lower it")
    take = len(pool_images) if train_images is None else train_images
    return MnistSplits(pool_images[:take], pool_labels[:take], test_images[cut:], test_labels[cut:], source)
