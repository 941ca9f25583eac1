"""Ports for tests that start servers on this machine.

A test never assumes a port is free. Where one process can bind port 0 and ask,
it does; a TensorFlow cluster of several processes needs a block of ports known
in advance, which `free_port_block` hands out so that nothing else takes it:

- from 10000-16383, a range nothing in hpc-train derives ports in (the bootstrap's
  job windows are 16384-32767, local clusters 6917-7999) and below the kernel's
  ephemeral range (32768-60999), so neither another suite's jobs nor an outgoing
  connection pick these ports;
- claimed with a lock file per port, held until this test process ends: two
  suites running side by side on one machine never get the same block, even
  before either has started its servers;
- probed by binding each port, so a program outside the tests that listens there
  is skipped too.
"""

from __future__ import annotations

import fcntl
import random
import socket
from pathlib import Path
from typing import IO

FIRST_PORT, LAST_PORT = 10000, 16383
CLAIMS = Path("/tmp/hpc-train-test-ports")
# Open lock files of this process's claims: closing one (or the process ending) releases its port.
_held: list[IO[bytes]] = []


def free_port_block(size: int) -> int:
    """A base port whose next `size` ports nobody listens on and no other test process has claimed."""
    for _ in range(200):
        base = random.randrange(FIRST_PORT, LAST_PORT + 1 - size)
        claims = [held for held in (claim(base + offset) for offset in range(size)) if held is not None]
        if len(claims) == size and all(_is_free(base + offset) for offset in range(size)):
            _held.extend(claims)
            return base
        for held in claims:
            held.close()
    raise RuntimeError(f"no free port block of {size} found in {FIRST_PORT}-{LAST_PORT}")


def claim(port: int) -> IO[bytes] | None:
    """This port's lock, or None when another test process (or this one, earlier) holds it."""
    try:
        CLAIMS.mkdir()
        CLAIMS.chmod(0o1777)  # suites of other users claim here too (mkdir's mode would pass through the umask)
    except FileExistsError:
        pass
    try:
        handle = open(CLAIMS / str(port), "ab")  # noqa: SIM115 - held open on purpose: the claim lives with it
    except PermissionError:  # another user's claim file: leave that port to them
        return None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    return handle


def _is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True
