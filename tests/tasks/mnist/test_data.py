from __future__ import annotations

import gzip
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from hpc_train.tasks.mnist import data as mnist
from hpc_train.tasks.mnist.data import DataError, load_mnist
from tests.mnist_data import shared_mnist

CLASS_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]  # MNIST's test set, per its README


def copy_test_set(directory: Path) -> Path:
    for name in mnist.TEST_FILES:
        shutil.copy(shared_mnist() / name, directory / name)
    return directory


def test_the_shared_test_set_splits_8000_and_2000() -> None:
    splits = load_mnist(shared_mnist())
    assert splits.train_images.shape == (8000, 28, 28) and splits.train_images.dtype == np.uint8
    assert splits.validation_images.shape == (2000, 28, 28)
    both = np.concatenate([splits.train_labels, splits.validation_labels])
    assert np.bincount(both, minlength=10).tolist() == CLASS_COUNTS
    assert splits.source.endswith("(IDX)")


def test_fewer_training_images_and_another_split() -> None:
    splits = load_mnist(shared_mnist(), train_images=1000, validation_images=500)
    assert (len(splits.train_images), len(splits.validation_images)) == (1000, 500)
    whole = load_mnist(shared_mnist(), validation_images=500)
    assert np.array_equal(splits.validation_images, whole.validation_images[-500:])


@pytest.mark.parametrize("train_images, validation_images, message", [
    (9000, 2000, "train_images: 9000 asked, 8000 there"),
    (None, 10000, "validation_images: 10000 leaves no training image"),
])
def test_impossible_splits_are_refused(train_images, validation_images, message: str) -> None:
    with pytest.raises(DataError, match=message):
        load_mnist(shared_mnist(), train_images, validation_images)


def test_with_the_training_set_validation_comes_from_the_test_set(tmp_path: Path) -> None:
    copy_test_set(tmp_path)
    shutil.copy(shared_mnist() / "train-labels-idx1-ubyte.gz", tmp_path)
    images = np.full((60000, 28, 28), 7, dtype=np.uint8)  # the real images are not on this machine
    header = struct.pack(">4I", 2051, 60000, 28, 28)
    (tmp_path / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(header + images.tobytes(), 1))
    splits = load_mnist(tmp_path, validation_images=2000)
    assert splits.train_images.shape == (60000, 28, 28) and int(splits.train_images[5, 5, 5]) == 7
    assert np.array_equal(splits.validation_images, load_mnist(shared_mnist()).validation_images)


def test_a_corrupted_file_is_caught_by_its_checksum(tmp_path: Path) -> None:
    copy_test_set(tmp_path)
    target = tmp_path / "t10k-labels-idx1-ubyte.gz"
    data = bytearray(target.read_bytes())
    data[-10] ^= 0xFF
    target.write_bytes(bytes(data))
    with pytest.raises(DataError, match="t10k-labels-idx1-ubyte.gz: SHA-256 .* differs from the published"):
        load_mnist(tmp_path)


def test_an_unpinned_file_is_checked_by_header_and_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy_test_set(tmp_path)
    monkeypatch.setattr(mnist, "KNOWN_SHA256", {})
    labels = tmp_path / "t10k-labels-idx1-ubyte.gz"
    labels.write_bytes(gzip.compress(gzip.decompress(labels.read_bytes())[:5000]))
    with pytest.raises(DataError, match="truncated"):
        load_mnist(tmp_path)
    labels.write_bytes(gzip.compress(struct.pack(">2I", 2051, 10000) + bytes(10000)))
    with pytest.raises(DataError, match="magic 2051.*expected magic 2049"):
        load_mnist(tmp_path)
    labels.write_bytes(b"not gzip at all")
    with pytest.raises(DataError, match="not a readable gzip file"):
        load_mnist(tmp_path)


def test_a_keras_npz_is_read_from_the_data_dir_or_the_keras_cache(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    whole = load_mnist(shared_mnist(), validation_images=10000 - 1)
    test_images = np.concatenate([whole.train_images, whole.validation_images])
    test_labels = np.concatenate([whole.train_labels, whole.validation_labels])
    train_images = np.zeros((60000, 28, 28), np.uint8)
    train_labels = np.zeros(60000, np.uint8)
    cache = tmp_path / "keras" / "datasets"
    cache.mkdir(parents=True)
    np.savez(cache / "mnist.npz", x_train=train_images, y_train=train_labels, x_test=test_images, y_test=test_labels)

    with pytest.raises(DataError, match="SHA-256 .* differs from the published"):  # not Keras' own file
        load_mnist(cache)
    monkeypatch.setattr(mnist, "KNOWN_SHA256", {})
    from_dir = load_mnist(cache)
    assert from_dir.train_images.shape == (60000, 28, 28)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    from_cache = load_mnist(None)
    assert np.array_equal(from_cache.validation_labels, from_dir.validation_labels)
    assert from_cache.source == str(cache / "mnist.npz")


def test_no_data_says_how_to_stage_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    with pytest.raises(DataError, match=r"no MNIST: .*hpc-train data fetch --dest DIR`, then pass --data-dir DIR"):
        load_mnist(None)
    with pytest.raises(DataError, match=r"no MNIST in .*: expected t10k-images-idx3-ubyte.gz"):
        load_mnist(tmp_path)
    with pytest.raises(DataError, match="is not a directory"):
        load_mnist(tmp_path / "missing")
