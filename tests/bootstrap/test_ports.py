from __future__ import annotations

import pytest

from hpc_train.bootstrap.ports import (assign_ports, base_window, derived_window, ports_above, rank_offsets,
                                       service_comment, service_component)
from hpc_train.errors import HpcTrainError, SlurmEnvError


def test_derived_window_is_aligned_and_below_the_ephemeral_range() -> None:
    plan = assign_ports([0, 1, 0, 1], job_id=1234)
    assert plan.ports == (26256, 26257, 26258, 26259)  # 16384 + (1234 mod 2048) * 8
    assert plan.rule == "SLURM_JOB_ID=1234: window 26256-26263"


def test_job_ids_wrap_inside_16384_to_32767() -> None:
    assert assign_ports([0], job_id=2048).ports == (16384,)
    assert assign_ports([0], job_id=2047).ports == (16384 + 2047 * 8,)
    assert max(assign_ports(list(range(200)), job_id=10**9 + 7).ports) <= 32767


def test_windows_of_different_sizes_nest_or_are_apart() -> None:
    small = set(assign_ports([0] * 1, job_id=33).ports)  # window 8 at 16384 + 33 * 8
    large = set(assign_ports(list(range(16)), job_id=16).ports)  # window 16 at 16384 + 16 * 16
    assert min(small) == 16384 + 264 and min(large) == 16384 + 256
    assert small <= set(range(16384 + 256, 16384 + 272))  # nested: the documented collision case


def test_steps_over_256_tasks_number_ports_per_node() -> None:
    local = [index % 8 for index in range(512)]  # 64 nodes x 8 tasks, block
    ports = assign_ports(local, job_id=1).ports
    assert set(ports) == set(range(16392, 16400))
    assert ports[:9] == tuple(range(16392, 16400)) + (16392,)


def test_port_base_numbers_from_the_base() -> None:
    assert assign_ports([0, 1], job_id=None, port_base=40000).ports == (40000, 40001)


def test_port_base_near_the_top_falls_back_to_local_indexes_then_refuses() -> None:
    assert assign_ports([0, 1, 0, 1], job_id=None, port_base=65534).ports == (65534, 65535, 65534, 65535)
    with pytest.raises(HpcTrainError, match="--port-base 65535 leaves no room for 2 tasks"):
        assign_ports([0, 1], job_id=None, port_base=65535)


def test_reserved_ports_win_over_the_job_id() -> None:
    assert assign_ports([0, 1], job_id=9, reserved=[12000, 12001]).ports == (12000, 12001)


def test_too_few_reserved_ports_name_the_variable() -> None:
    with pytest.raises(SlurmEnvError, match=r"SLURM_STEP_RESV_PORTS='12000': .*--resv-ports=2"):
        assign_ports([0, 1], job_id=9, reserved=[12000])


def test_no_job_id_and_no_base_says_what_to_pass() -> None:
    with pytest.raises(SlurmEnvError, match="SLURM_JOB_ID is not set.*--port-base"):
        assign_ports([0], job_id=None)


@pytest.mark.parametrize("ranks, above, size", [(2, 3, 8), (5, 3, 8), (6, 3, 16), (8, 3, 16), (16, 3, 32),
                                                (13, 3, 16), (16, 0, 16), (256, 2, 512)])
def test_a_window_grows_to_hold_the_services_ports_above_the_ranks(ranks: int, above: int, size: int) -> None:
    window = derived_window(1234, ranks, ranks, above)
    assert len(window) == size and (window.start - 16384) % size == 0 and window.stop - 1 <= 32767
    plan = assign_ports(list(range(ranks)), job_id=1234, above=above)
    # The ranks take the grown window's first ports; its top `above` ports are the services', none a rank's.
    assert plan.ports == tuple(window[:ranks]) and not set(plan.ports) & set(window[len(window) - above:])
    assert plan.rule == f"SLURM_JOB_ID=1234: window {window.start}-{window.stop - 1}"


def test_past_256_ranks_the_services_ports_sit_above_the_fullest_nodes_tasks() -> None:
    window = derived_window(7, 512, 8, above=3)  # 64 nodes x 8 tasks: local indexes 0-7, then 3 ports: 16
    assert len(window) == 16 and rank_offsets(512, 8) == 8
    assert set(assign_ports([index % 8 for index in range(512)], job_id=7, above=3).ports) == set(window[:8])


def test_a_port_base_window_grows_from_the_base() -> None:
    assert base_window(20000, 2) == range(20000, 20008)
    assert base_window(20000, 8, above=3) == range(20000, 20016)


def test_the_jobs_comment_carries_the_services_ports_to_whoever_reads_it() -> None:
    assert ports_above(service_comment(3)) == 3
    assert ports_above(f"{service_comment(17)} the user's own words") == 17
    assert ports_above("hpc-train-service-ports=x") == ports_above("my-hpc-train-service-ports=4") == 0
    assert ports_above(None) == ports_above("") == ports_above("(null)") == 0


def test_the_comment_names_the_services_own_component_in_one_word() -> None:
    """One word (scontrol show job -o ends the comment at a space), read back by both parsers."""
    word = service_comment(3, 2)
    assert word == "hpc-train-service-ports=3,hpc-train-service-component=2" and " " not in word
    assert ports_above(word) == 3 and service_component(word) == 2
    assert service_component(f"{word} mine") == 2 and ports_above(f"{word};mine") == 3
    assert service_component(service_comment(3)) is None and service_component(None) is None
    assert service_component("hpc-train-service-component=x") is None
    assert service_component("my-hpc-train-service-component=1") is None
