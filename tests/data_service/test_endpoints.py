"""The data service's ports: the top of the job's window, above the ranks', or one line when there is no room."""

from __future__ import annotations

import pytest

from hpc_train.bootstrap.ports import assign_ports, derived_window
from hpc_train.data_service.endpoints import service_ports, window
from hpc_train.errors import HpcTrainError


def test_the_service_takes_the_top_of_the_ranks_window_and_never_a_ranks_port() -> None:
    ranks = assign_ports([0, 0], job_id=4242).ports
    ports = window(4242, 2, 1)
    assert ports == derived_window(4242, 2, 1)
    served = service_ports(ports, 2, 3)
    assert served.dispatcher == ports.stop - 1 and served.workers == (ports.stop - 2, ports.stop - 3, ports.stop - 4)
    every = [served.dispatcher, *served.workers]
    assert len(set(every)) == 4 and not set(every) & set(ranks) and all(port in ports for port in every)


def test_a_port_base_window_starts_at_the_base() -> None:
    assert window(None, 3, 3, port_base=20000) == range(20000, 20008)
    assert window(None, 8, 8, port_base=20000, above=3) == range(20000, 20016)
    with pytest.raises(HpcTrainError, match="pass a lower --port-base"):
        window(None, 8, 8, port_base=65530, above=3)


@pytest.mark.parametrize("ranks, workers", [(8, 2), (16, 3), (6, 7), (16, 15)])
def test_a_window_grows_until_the_service_fits_above_the_ranks(ranks: int, workers: int) -> None:
    """8- and 16-rank jobs (whose rank window is full) get a window twice as large, the same the ranks compute."""
    ports = window(4242, ranks, 1, above=1 + workers)
    assert ports == derived_window(4242, ranks, 1, 1 + workers) and len(ports) >= ranks + 1 + workers
    served = service_ports(ports, ranks, workers)
    ranks_ports = assign_ports([0] * ranks, job_id=4242, above=1 + workers).ports
    assert set(ranks_ports) <= set(ports) and not {served.dispatcher, *served.workers} & set(ranks_ports)


def test_a_window_without_room_is_one_line() -> None:
    with pytest.raises(HpcTrainError) as raised:
        service_ports(range(16384, 16392), 6, 2)
    assert "ask for at most 1 data workers" in str(raised.value)
    with pytest.raises(HpcTrainError, match="SLURM_JOB_ID"):
        window(None, 2, 1)
