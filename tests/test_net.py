"""tests/net.py: port blocks for tests are free, and never handed out twice, even to another test process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.net import claim, free_port_block

ROOT = Path(__file__).resolve().parents[1]


def test_blocks_in_one_process_never_overlap() -> None:
    blocks = [set(range(base, base + 4)) for base in (free_port_block(4) for _ in range(20))]
    assert len(set().union(*blocks)) == 4 * len(blocks)


def test_a_block_another_process_holds_is_not_handed_out() -> None:
    holder = subprocess.Popen([sys.executable, "-c", "import sys; from tests.net import free_port_block; "
                               "print(free_port_block(3), flush=True); sys.stdin.read()"],
                              cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        base = int(holder.stdout.readline())
        assert all(claim(port) is None for port in range(base, base + 3))
    finally:
        holder.communicate("")
    claims = [claim(port) for port in range(base, base + 3)]  # the holder ended: its claims went with it
    assert all(claims)
    for held in claims:
        held.close()
