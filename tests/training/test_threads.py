"""Sizing TensorFlow's inter-op pool before it starts: one per CPU, never one for parameter servers."""

from __future__ import annotations

import pytest

from hpc_train.training.threads import VARIABLE, inter_op_threads, size_inter_op_pool


@pytest.mark.parametrize(("requested", "cpus", "strategy", "expected"), [
    (None, 1, "parameter_server", 2), (None, 16, "parameter_server", 16), (None, 1, "multiworker", 1),
    (None, 2, "multiworker", 2), (None, 1, "none", 1), (1, 16, "parameter_server", 1), (8, 1, "multiworker", 8)])
def test_one_per_cpu_but_never_one_for_a_parameter_server_task_unless_asked(requested: int | None, cpus: int,
                                                                           strategy: str, expected: int) -> None:
    assert inter_op_threads(requested, cpus, strategy) == expected


def test_the_size_is_exported_for_tensorflow_to_read() -> None:
    environ: dict[str, str] = {}
    threads = size_inter_op_pool(None, "parameter_server", environ)
    assert environ == {VARIABLE: str(threads)} and threads >= 2


def test_a_size_in_the_environment_stands_unless_the_config_asks_another() -> None:
    environ = {VARIABLE: "6"}
    assert size_inter_op_pool(None, "multiworker", environ) == 6 and environ[VARIABLE] == "6"
    assert size_inter_op_pool(3, "multiworker", environ) == 3 and environ[VARIABLE] == "3"


def test_a_nonsense_size_in_the_environment_is_replaced() -> None:
    environ = {VARIABLE: "lots"}
    assert size_inter_op_pool(None, "parameter_server", environ) >= 2
    assert environ[VARIABLE].isdigit()
