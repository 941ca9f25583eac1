"""The documented rank -> role mapping."""

from __future__ import annotations

import pytest

from hpc_train.bootstrap.roles import Role, Strategy, check_role_counts, role_of, uses_gpus
from hpc_train.errors import HpcTrainError


def test_multiworker_makes_every_rank_a_worker_of_its_own_index() -> None:
    assert [role_of(rank, Strategy.MULTIWORKER, 1) for rank in range(3)] == [
        Role("worker", 0), Role("worker", 1), Role("worker", 2)]


def test_parameter_server_is_chief_then_ps_then_workers() -> None:
    assert [role_of(rank, Strategy.PARAMETER_SERVER, 2) for rank in range(6)] == [
        Role("chief", 0), Role("ps", 0), Role("ps", 1), Role("worker", 0), Role("worker", 1), Role("worker", 2)]


def test_a_parameter_server_job_needs_a_chief_and_a_worker_beside_its_ps() -> None:
    check_role_counts(3, Strategy.PARAMETER_SERVER, 1)
    with pytest.raises(HpcTrainError, match="--num-ps 2 needs at least 4 tasks"):
        check_role_counts(3, Strategy.PARAMETER_SERVER, 2)
    check_role_counts(1, Strategy.MULTIWORKER, 5)  # num_ps means nothing there


def test_only_computing_roles_get_gpus() -> None:
    assert uses_gpus("worker", Strategy.PARAMETER_SERVER)
    assert not uses_gpus("ps", Strategy.PARAMETER_SERVER)
    assert not uses_gpus("chief", Strategy.PARAMETER_SERVER)
    assert uses_gpus("worker", Strategy.MULTIWORKER)


def test_unknown_strategies_list_the_valid_ones() -> None:
    with pytest.raises(HpcTrainError, match="unknown strategy 'horovod'; choose one of: multiworker, parameter_server"):
        Strategy.parse("horovod")
