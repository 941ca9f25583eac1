"""The ports a local cluster's daemons listen on, and where to put them when some are taken.

A cluster's ports all derive from its controller port (spec.py). A fixed default
can be taken on a shared machine (another cluster, another program), so `up`
without --port moves the whole cluster to the first controller port, PORT_STEP
apart, whose ports are all free; the port it chose is in DIR/slurm.conf, where
`up`, `status` and `down` read it back while the cluster runs.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from hpc_train.bootstrap.portcheck import port_is_free
from hpc_train.errors import HpcTrainError
from hpc_train.localslurm.spec import LocalCluster

# Apart enough that a moved cluster of a few nodes (controller, then one port per node) keeps clear of the next.
PORT_STEP = 10
PORT_TRIES = 20
_CONTROLLER_LINE = re.compile(r"^SlurmctldPort=(\d+)$", re.MULTILINE)


def daemon_ports(cluster: LocalCluster) -> dict[str, int]:
    """Each daemon's port on this machine's own network stack (separate hosts' slurmd listen in their namespaces)."""
    ports = {"slurmctld": cluster.controller_port}
    if not cluster.separate_hosts:
        ports.update({f"slurmd-{name}": cluster.node_port(index) for index, name in enumerate(cluster.node_names)})
    if cluster.accounting:
        ports.update({"slurmdbd": cluster.dbd_port, "mariadbd": cluster.database_port})
    return ports


def taken(cluster: LocalCluster, starting: set[str]) -> dict[str, int]:
    """The daemons of `starting` whose port something on this machine already listens on."""
    return {daemon: port for daemon, port in daemon_ports(cluster).items()
            if daemon in starting and not port_is_free(port)}


def refuse_taken(cluster: LocalCluster, starting: set[str]) -> None:
    busy = taken(cluster, starting)
    if busy:
        daemon, port = next(iter(busy.items()))
        raise HpcTrainError(f"port {port} for {daemon} is already in use on this machine (another cluster or "
                            f"program); pass another --port (the nodes take the next ones), or leave --port out "
                            f"for free ones")


def recorded_port(directory: Path) -> int | None:
    """The controller port in the slurm.conf `up` wrote in `directory`, if any."""
    try:
        found = _CONTROLLER_LINE.search((directory / "slurm.conf").read_text())
    except OSError:
        return None
    return int(found.group(1)) if found else None


def first_free(cluster: LocalCluster) -> LocalCluster:
    """The cluster at the first controller port from its own whose daemons' ports are all free here."""
    every_daemon = set(daemon_ports(cluster))
    for port in range(cluster.controller_port, cluster.controller_port + PORT_TRIES * PORT_STEP, PORT_STEP):
        try:
            moved = replace(cluster, controller_port=port)
        except HpcTrainError:  # past the highest port: no room left above
            break
        if not taken(moved, every_daemon):
            return moved
    raise HpcTrainError(f"no free ports for a local cluster from {cluster.controller_port} on (tried "
                        f"{PORT_TRIES}, {PORT_STEP} apart); pass --port with a free range")
