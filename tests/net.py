"""Ports for tests that start servers on this machine."""

from __future__ import annotations

import random
import socket


def free_port_block(size: int) -> int:
    """A base port whose next `size` ports nobody listens on right now (in 20000-30000)."""
    for _ in range(200):
        base = random.randrange(20000, 30000 - size)
        if all(_is_free(base + offset) for offset in range(size)):
            return base
    raise RuntimeError("no free port block found in 20000-30000")


def _is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True
