"""Sizing TensorFlow's inter-op pool before it starts: never one thread, the user's word first."""

from __future__ import annotations

import pytest

from hpc_train.training.threads import MIN_INTER_OP_THREADS, VARIABLE, inter_op_threads, size_inter_op_pool


@pytest.mark.parametrize(("requested", "cpus", "expected"), [(None, 1, 2), (None, 2, 2), (None, 16, 16), (1, 16, 1),
                                                             (8, 1, 8)])
def test_one_per_cpu_but_never_one_unless_asked(requested: int | None, cpus: int, expected: int) -> None:
    assert inter_op_threads(requested, cpus) == expected


def test_the_size_is_exported_for_tensorflow_to_read() -> None:
    environ: dict[str, str] = {}
    threads = size_inter_op_pool(None, environ)
    assert environ == {VARIABLE: str(threads)} and threads >= MIN_INTER_OP_THREADS


def test_a_size_in_the_environment_stands_unless_the_config_asks_another() -> None:
    environ = {VARIABLE: "6"}
    assert size_inter_op_pool(None, environ) == 6 and environ[VARIABLE] == "6"
    assert size_inter_op_pool(3, environ) == 3 and environ[VARIABLE] == "3"


def test_a_nonsense_size_in_the_environment_is_replaced() -> None:
    environ = {VARIABLE: "lots"}
    assert size_inter_op_pool(None, environ) >= MIN_INTER_OP_THREADS
    assert environ[VARIABLE].isdigit()
