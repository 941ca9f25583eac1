"""Stage MNIST where compute nodes can read it: download Keras' mnist.npz, verify it, then move it in place.

Run on a machine with internet (a login node); compute nodes then read the file
with `--data-dir DIR` (or from Keras' cache, the default destination).
"""

from __future__ import annotations

import hashlib
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

from hpc_train.tasks.mnist.data import KNOWN_SHA256, NPZ_NAME, DataError

MNIST_URL = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz"
CHUNK = 1 << 16


def fetch_mnist(destination: Path, url: str = MNIST_URL, timeout: float = 60.0) -> Path:
    """Download mnist.npz into `destination`; return its path. A bad download leaves nothing behind."""
    destination.mkdir(parents=True, exist_ok=True)
    target = destination / NPZ_NAME
    if target.is_file() and _sha256(target.read_bytes()) == KNOWN_SHA256[NPZ_NAME]:
        _progress(f"{target} is already there and verified")
        return target
    partial = destination / f".{NPZ_NAME}.partial"
    try:
        digest = _download(url, partial, timeout)
        if digest != KNOWN_SHA256[NPZ_NAME]:
            raise DataError(f"{url}: SHA-256 {digest[:12]}... differs from Keras' {KNOWN_SHA256[NPZ_NAME][:12]}...; "
                            "the download is damaged or not MNIST: try again, or another --url")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    _progress(f"saved {target}")
    return target


def _download(url: str, path: Path, timeout: float) -> str:
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, path.open("wb") as out:
            total = int(response.headers.get("Content-Length") or 0)
            done, shown = 0, -10
            while chunk := response.read(CHUNK):
                out.write(chunk)
                digest.update(chunk)
                done += len(chunk)
                if total and done * 100 // total >= shown + 10:
                    shown = done * 100 // total
                    _progress(f"downloading {url}: {shown}% of {total / 1e6:.1f} MB")
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        raise DataError(f"cannot download {url} ({reason}); run this on a machine with internet (a login node), "
                        "or copy mnist.npz there by hand") from None
    return digest.hexdigest()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _progress(message: str) -> None:
    print(f"hpc-train data: {message}", file=sys.stderr, flush=True)
