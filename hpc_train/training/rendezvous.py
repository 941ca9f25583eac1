"""Start-up barrier: every task of a job waits for every other, or fails naming the missing ones.

TensorFlow's own start waits for a missing peer for a very long time (28
minutes here, until cancelled). Before TensorFlow starts, each task listens on
its own port, greets every peer and waits to be greeted by every peer; the
port is then handed over to TensorFlow's server. A peer that never comes ends
the wait after `timeout` seconds with an error that names it.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Sequence

from hpc_train.errors import HpcTrainError

POLL_SECONDS = 0.2


def wait_for_peers(addresses: Sequence[str], me: int, timeout: float,
                   names: Sequence[str] | None = None) -> None:
    """Return once every task in `addresses` has greeted this one and been greeted; raise after `timeout`."""
    names = names or [f"task {index}" for index in range(len(addresses))]
    peers = set(range(len(addresses))) - {me}
    if not peers:
        return
    listener = _listen(addresses[me])
    reached: set[int] = set()
    greeted: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while reached != peers or greeted != peers:
            reached |= {peer for peer in peers - reached if _greet(addresses[peer], me)}
            greeted |= _accept_greetings(listener, len(addresses))
            if time.monotonic() > deadline:
                missing = sorted((peers - reached) | (peers - greeted))
                raise HpcTrainError(
                    f"{', '.join(f'{names[p]} at {addresses[p]}' for p in missing)} did not start within "
                    f"{timeout:.0f} s; see that task's log (it may have failed, or its node be unreachable)")
    finally:
        listener.close()


def _listen(address: str) -> socket.socket:
    port = int(address.rpartition(":")[2])
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("0.0.0.0", port))
    except OSError as error:
        listener.close()
        raise HpcTrainError(f"cannot listen on port {port} ({error.strerror}): another job on this node? "
                            "pass --port-base with a free range, or use srun --resv-ports") from None
    listener.listen(64)
    listener.setblocking(False)
    return listener


def _greet(address: str, me: int) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=POLL_SECONDS) as connection:
            connection.sendall(f"{me}\n".encode())
        return True
    except OSError:
        return False


def _accept_greetings(listener: socket.socket, tasks: int) -> set[int]:
    """Ranks that greeted us since the last look."""
    greeted: set[int] = set()
    while select.select([listener], [], [], POLL_SECONDS)[0]:
        connection, _ = listener.accept()
        with connection:
            connection.settimeout(POLL_SECONDS * 5)
            try:
                text = connection.recv(32).decode().strip()
            except OSError:
                continue
        if text.isdigit() and int(text) < tasks:
            greeted.add(int(text))
    return greeted
