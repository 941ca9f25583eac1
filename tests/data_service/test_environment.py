"""What a rank reads of its job's data service, from the environment."""

from __future__ import annotations

from hpc_train.data_service.environment import (ADDRESS, DISTRIBUTED_EPOCH, WORKERS, ServiceEnv, address, job_name,
                                                 skip_per_worker)


def test_a_rank_without_the_variable_has_no_service() -> None:
    assert ServiceEnv.from_environ({}) is None
    assert ServiceEnv.from_environ({ADDRESS: " "}) is None


def test_what_the_body_sets_a_rank_reads_back() -> None:
    service = ServiceEnv(address("node1", 16391), job_name("77", 2, 1234))
    assert service.address == "grpc://node1:16391"
    assert ServiceEnv.from_environ(service.environ()) == service
    assert service.mode == DISTRIBUTED_EPOCH
    assert job_name("77", 2, 1234) != job_name("77", 3, 1234)  # an attempt's own


def test_the_workers_count_reaches_the_rank_and_shares_a_resumed_skip() -> None:
    service = ServiceEnv(address("node1", 16391), "j", workers=3)
    assert ServiceEnv.from_environ(service.environ()) == service
    assert ServiceEnv.from_environ({ADDRESS: "grpc://n:1", WORKERS: "x"}).workers == 1  # (not a count: one)
    assert [skip_per_worker(read, 2) for read in (0, 1, 200, 201)] == [0, 0, 100, 100]
    assert skip_per_worker(12, 1) == 12 and skip_per_worker(12, 0) == 12
