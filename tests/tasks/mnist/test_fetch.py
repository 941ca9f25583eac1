"""Staging MNIST: a verified download that leaves nothing behind when it fails (served from this machine)."""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpc_train.tasks.mnist import data as mnist
from hpc_train.tasks.mnist import fetch
from hpc_train.tasks.mnist.data import DataError

PAYLOAD = b"pretend this is mnist.npz" * 1000


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "served").mkdir()
    (tmp_path / "served" / "mnist.npz").write_bytes(PAYLOAD)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(tmp_path / "served"), **kwargs)

        def log_message(self, *args) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_a_download_with_the_wrong_checksum_is_refused_and_removed(server: str, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    with pytest.raises(DataError, match="SHA-256 .* differs from Keras'"):
        fetch.fetch_mnist(dest, f"{server}/mnist.npz")
    assert list(dest.iterdir()) == []


def test_a_verified_download_lands_and_is_not_fetched_twice(server: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(mnist.KNOWN_SHA256, "mnist.npz", hashlib.sha256(PAYLOAD).hexdigest())
    dest = tmp_path / "dest"
    path = fetch.fetch_mnist(dest, f"{server}/mnist.npz")
    assert path.read_bytes() == PAYLOAD and [p.name for p in dest.iterdir()] == ["mnist.npz"]
    assert "100%" in capsys.readouterr().err
    fetch.fetch_mnist(dest, f"{server}/missing.npz")  # already there and verified: no request
    assert "already there and verified" in capsys.readouterr().err


def test_a_failed_download_is_one_clear_error(server: str, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    with pytest.raises(DataError, match=r"cannot download .*missing.npz \(File not found\); .*login node"):
        fetch.fetch_mnist(dest, f"{server}/missing.npz")
    assert list(dest.iterdir()) == []
