"""A rank's CPU time and resident memory, its children's included, read from Linux's /proc.

Reading a process's line is pure (`parse_stat`, `tree_usage`); `process_table` reads /proc. A rank is a process
tree: the trainer's one process, or a user's command under its supervisor.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class Process:
    parent: int
    cpu_seconds: float  # user and system time so far
    resident: int  # bytes


def parse_stat(text: str) -> Process | None:
    """/proc/PID/stat's fields after the command's name (which may hold spaces and parentheses) (pure)."""
    fields = text[text.rfind(")") + 2:].split()
    try:
        return Process(int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS, int(fields[21]) * PAGE)
    except (IndexError, ValueError):
        return None


def process_table(proc: Path = Path("/proc")) -> dict[int, Process]:
    """Every process this machine's /proc shows (those that end meanwhile left out)."""
    table: dict[int, Process] = {}
    for entry in proc.glob("[0-9]*"):
        try:
            parsed = parse_stat((entry / "stat").read_text())
        except OSError:
            continue
        if parsed is not None:
            table[int(entry.name)] = parsed
    return table


def tree_usage(pid: int, table: Mapping[int, Process]) -> tuple[float, int] | None:
    """(CPU seconds, resident bytes) of `pid` and every process under it; None when it is gone (pure)."""
    if pid not in table:
        return None
    children: dict[int, list[int]] = {}
    for child, process in table.items():
        children.setdefault(process.parent, []).append(child)
    seen, todo = set(), [pid]
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(children.get(current, ()))
    return sum(table[p].cpu_seconds for p in seen), sum(table[p].resident for p in seen)


def cores_of(pid: int) -> int:
    """The cores `pid` may run on (Slurm's binding, a cgroup's cpuset); this machine's where it cannot be read."""
    try:
        return len(os.sched_getaffinity(pid))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
