"""`cluster up --partition NAME:NODES[:GPUS]`: a local cluster with several partitions (pure).

A heterogeneous job needs them: the chief and ps on a CPU partition, the workers on a GPU one, e.g.
``--partition cpu:node[1-2]:0 --partition gpu:node[3-4]:2`` (or ``cpu:node[1-2]`` with --gpus-per-node 0).
The first partition is the default one; the cluster's nodes are the union, in the order given.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import hostlist

from hpc_train.bootstrap.nodelist import expand_nodelist
from hpc_train.errors import HpcTrainError

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
EXAMPLE = "--partition gpu:node[3-4]:2"


@dataclass(frozen=True)
class PartitionSpec:
    """One partition: its name, its nodes (a Slurm node list) and the GPUs each node declares (None: the
    cluster's --gpus-per-node)."""

    name: str
    nodes: str
    gpus: int | None = None

    @property
    def node_names(self) -> tuple[str, ...]:
        return expand_nodelist(f"--partition {self.name}", self.nodes)


def parse_partition(text: str) -> PartitionSpec:
    """Read NAME:NODES[:GPUS]; a bad one is one line naming it and the form."""
    name, _, rest = text.partition(":")
    nodes, _, gpus = rest.partition(":")
    if not _NAME.fullmatch(name) or not nodes or (gpus and not gpus.isdigit()):
        raise HpcTrainError(f"--partition {text!r}: expected NAME:NODES[:GPUS], e.g. {EXAMPLE}")
    spec = PartitionSpec(name, nodes, int(gpus) if gpus else None)
    spec.node_names  # refuse a bad node list at once
    return spec


def check_partitions(partitions: Sequence[PartitionSpec], default_gpus: int) -> None:
    """Names unique, and a node in two partitions declares the same GPUs in both."""
    names = [spec.name for spec in partitions]
    repeated = next((name for name in names if names.count(name) > 1), None)
    if repeated:
        raise HpcTrainError(f"--partition {repeated} is given twice; name each partition once")
    gpus_of: dict[str, int] = {}
    for spec in partitions:
        for node in spec.node_names:
            gpus = default_gpus if spec.gpus is None else spec.gpus
            if gpus_of.setdefault(node, gpus) != gpus:
                raise HpcTrainError(f"--partition {spec.name}: {node} is in another partition with "
                                    f"{gpus_of[node]} GPUs; a node has one GPU count")


def union_nodes(partitions: Sequence[PartitionSpec]) -> tuple[str, ...]:
    """Every partition's nodes, each once, in the order given."""
    return tuple(dict.fromkeys(node for spec in partitions for node in spec.node_names))


def compressed(nodes: Sequence[str]) -> str:
    """A Slurm node list naming `nodes` (for messages and slurm.conf)."""
    return hostlist.collect_hostlist(list(nodes))


def partition_lines(partitions: Sequence[PartitionSpec]) -> list[str]:
    """slurm.conf's PartitionName lines, the first the default."""
    return [f"PartitionName={spec.name} Nodes={compressed(spec.node_names)} Default={'YES' if index == 0 else 'NO'} "
            "MaxTime=INFINITE State=UP" for index, spec in enumerate(partitions)]


def node_gpus(partitions: Sequence[PartitionSpec], default_gpus: int) -> dict[str, int]:
    """The GPUs each node declares."""
    return {node: default_gpus if spec.gpus is None else spec.gpus
            for spec in partitions for node in spec.node_names}
