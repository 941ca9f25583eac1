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


def test_a_window_without_room_is_one_line() -> None:
    with pytest.raises(HpcTrainError) as raised:
        service_ports(range(16384, 16392), 6, 2)
    assert "ask for at most 1 data workers" in str(raised.value)
    with pytest.raises(HpcTrainError, match="SLURM_JOB_ID"):
        window(None, 2, 1)
