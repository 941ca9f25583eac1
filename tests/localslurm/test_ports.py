"""A local cluster's ports: which daemon listens where, and `up` moving off ports something else holds."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpc_train.errors import HpcTrainError
from hpc_train.localslurm import control, ports
from hpc_train.localslurm.spec import LocalCluster, render_slurm_conf


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port this test holds (port 0: the kernel picks one nobody has), listening, as a daemon would."""
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", 0))
        holder.listen()
        yield holder.getsockname()[1]


def test_every_daemon_on_this_machines_stack_has_its_port() -> None:
    cluster = LocalCluster(Path("/tmp/x"), nodes="n[1-2]", controller_port=7000, accounting=True)
    assert ports.daemon_ports(cluster) == {"slurmctld": 7000, "slurmd-n1": 7001, "slurmd-n2": 7002,
                                           "slurmdbd": 7300, "mariadbd": 7301}
    # separate hosts: each slurmd listens in its own namespace, not on this machine's stack
    apart = LocalCluster(Path("/tmp/x"), nodes="n[1-2]", controller_port=7000, separate_hosts=True)
    assert ports.daemon_ports(apart) == {"slurmctld": 7000}


def test_a_taken_port_is_refused_in_one_line_naming_the_daemon(held_port: int) -> None:
    cluster = LocalCluster(Path("/tmp/x"), nodes="n1", controller_port=held_port - 1)
    with pytest.raises(HpcTrainError, match=rf"^port {held_port} for slurmd-n1 is already in use on this machine "
                                            r".*pass another --port"):
        ports.refuse_taken(cluster, {"slurmctld", "slurmd-n1"})
    ports.refuse_taken(cluster, {"slurmctld"})  # a daemon already running holds its own port: not checked


def test_up_without_port_moves_a_stopped_cluster_off_a_taken_port(held_port: int, tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, nodes="n[1-2]", controller_port=held_port)
    moved = control.placed(cluster)
    assert (moved.controller_port - held_port) % ports.PORT_STEP == 0 and moved.controller_port > held_port
    assert held_port not in ports.daemon_ports(moved).values()
    assert moved.directory == cluster.directory and moved.nodes == cluster.nodes


def test_the_port_up_wrote_is_read_back(tmp_path: Path) -> None:
    assert ports.recorded_port(tmp_path) is None
    (tmp_path / "slurm.conf").write_text(render_slurm_conf(LocalCluster(tmp_path, controller_port=7345)))
    assert ports.recorded_port(tmp_path) == 7345
    assert control.as_recorded(LocalCluster(tmp_path)).controller_port == 7345
