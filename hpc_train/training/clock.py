"""How long this process has run: start-up is a cost every restart pays again. Standard library only."""

from __future__ import annotations

import os
import time
from pathlib import Path


def seconds_since_process_start() -> float:
    """Wall-clock seconds since this process started (Linux: /proc; elsewhere since this module loaded)."""
    try:
        started_ticks = int(Path("/proc/self/stat").read_text().rpartition(")")[2].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return uptime - started_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _LOADED


_LOADED = time.monotonic()
