"""The start-up barrier: all tasks meet, or the missing ones are named."""

from __future__ import annotations

import threading
import time

import pytest

from hpc_train.errors import HpcTrainError
from hpc_train.training.rendezvous import wait_for_peers
from tests.net import free_port_block


def test_tasks_starting_at_different_times_all_get_through() -> None:
    base = free_port_block(3)
    addresses = [f"127.0.0.1:{base + index}" for index in range(3)]
    errors: list[BaseException] = []

    def task(me: int, delay: float) -> None:
        time.sleep(delay)
        try:
            wait_for_peers(addresses, me, timeout=20)
        except BaseException as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    threads = [threading.Thread(target=task, args=(me, delay)) for me, delay in ((0, 0), (1, 1.0), (2, 2.5))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors and not any(thread.is_alive() for thread in threads)


def test_a_peer_that_never_starts_is_named_after_the_timeout() -> None:
    base = free_port_block(3)
    addresses = [f"127.0.0.1:{base + index}" for index in range(3)]
    names = ["chief 0", "ps 0", "worker 0"]
    other = threading.Thread(target=lambda: pytest.raises(HpcTrainError, wait_for_peers, addresses, 1, 3, names))
    other.start()
    start = time.monotonic()
    with pytest.raises(HpcTrainError) as raised:
        wait_for_peers(addresses, 0, timeout=2, names=names)
    assert time.monotonic() - start < 6
    assert str(raised.value).startswith(f"worker 0 at 127.0.0.1:{base + 2} did not start within 2 s")
    other.join()


def test_the_port_is_free_again_for_tensorflow_afterwards() -> None:
    import socket

    base = free_port_block(2)
    addresses = [f"127.0.0.1:{base}", f"127.0.0.1:{base + 1}"]
    thread = threading.Thread(target=wait_for_peers, args=(addresses, 1, 10))
    thread.start()
    wait_for_peers(addresses, 0, timeout=10)
    thread.join()
    with socket.socket() as server:  # as TensorFlow's server will
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("0.0.0.0", base))
