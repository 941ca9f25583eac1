"""The documented rank -> role mapping."""

from __future__ import annotations

import pytest

from hpc_train.bootstrap.roles import Roles, Strategy, assign_roles, uses_gpus
from hpc_train.errors import HpcTrainError


def test_multiworker_makes_every_rank_a_worker_of_its_own_index() -> None:
    assert assign_roles(3, Strategy.MULTIWORKER, 1) == Roles(("worker",) * 3, (0, 1, 2))


def test_parameter_server_is_chief_then_ps_then_workers() -> None:
    assert assign_roles(6, Strategy.PARAMETER_SERVER, 2) == Roles(
        ("chief", "ps", "ps", "worker", "worker", "worker"), (0, 0, 1, 0, 1, 2))


def test_a_parameter_server_job_needs_a_chief_and_a_worker_beside_its_ps() -> None:
    assert assign_roles(3, Strategy.PARAMETER_SERVER, 1).types == ("chief", "ps", "worker")
    with pytest.raises(HpcTrainError, match="--num-ps 2 needs at least 4 tasks"):
        assign_roles(3, Strategy.PARAMETER_SERVER, 2)
    assert assign_roles(1, Strategy.MULTIWORKER, 5).types == ("worker",)  # num_ps means nothing there


def test_only_computing_roles_get_gpus() -> None:
    assert uses_gpus("worker", Strategy.PARAMETER_SERVER)
    assert not uses_gpus("ps", Strategy.PARAMETER_SERVER)
    assert not uses_gpus("chief", Strategy.PARAMETER_SERVER)
    assert uses_gpus("worker", Strategy.MULTIWORKER)


def test_unknown_strategies_list_the_valid_ones() -> None:
    with pytest.raises(HpcTrainError, match="unknown strategy 'horovod'; choose one of: multiworker, parameter_server"):
        Strategy.parse("horovod")
