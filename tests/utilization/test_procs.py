"""A rank's CPU time and memory from /proc: a process's line, and its children counted with it."""

from __future__ import annotations

import os
import subprocess
import sys

from hpc_train.utilization.procs import PAGE, TICKS, Process, cores_of, parse_stat, process_table, tree_usage


def test_a_stat_line_whose_name_holds_spaces_and_parentheses() -> None:
    fields = ["S", "7", *["0"] * 9, str(3 * TICKS), str(TICKS), *["0"] * 8, "250"]
    assert parse_stat(f"42 (python (x) y) {' '.join(fields)}") == Process(7, 4.0, 250 * PAGE)
    assert parse_stat("42 (cut") is None


def test_a_rank_counts_its_childrens_time_and_memory_and_a_gone_one_is_none() -> None:
    table = {1: Process(0, 1.0, 10), 2: Process(1, 2.0, 20), 3: Process(2, 4.0, 40), 4: Process(0, 8.0, 80)}
    assert tree_usage(1, table) == (7.0, 70)
    assert tree_usage(9, table) is None


def test_this_machine_shows_this_process_and_its_child() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        table = process_table()
        assert table[child.pid].parent == os.getpid()
        seconds, resident = tree_usage(os.getpid(), table)
        assert resident > table[os.getpid()].resident > 0 and seconds > 0
        assert cores_of(os.getpid()) == len(os.sched_getaffinity(0))
    finally:
        child.communicate(b"")
