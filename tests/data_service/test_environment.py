"""What a rank reads of its job's data service, from the environment."""

from __future__ import annotations

from hpc_train.data_service.environment import ADDRESS, DISTRIBUTED_EPOCH, ServiceEnv, address, job_name


def test_a_rank_without_the_variable_has_no_service() -> None:
    assert ServiceEnv.from_environ({}) is None
    assert ServiceEnv.from_environ({ADDRESS: " "}) is None


def test_what_the_body_sets_a_rank_reads_back() -> None:
    service = ServiceEnv(address("node1", 16391), job_name("77", 2, 1234))
    assert service.address == "grpc://node1:16391"
    assert ServiceEnv.from_environ(service.environ()) == service
    assert service.mode == DISTRIBUTED_EPOCH
    assert job_name("77", 2, 1234) != job_name("77", 3, 1234)  # an attempt's own
