"""A cluster's partitions, read in one place: what each allows (nodes, time) and each node's GPUs.

Read by preflight (is a request possible?) and by doctor (which partition, how
many GPUs). `parse_partitions` is pure; `read_partitions` asks Slurm once and
says in one line when it does not answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import hostlist

from hpc_train.errors import HpcTrainError
from hpc_train.slurm.client import SlurmClient, last_words
from hpc_train.slurm.client import fields as slurm_fields
from hpc_train.spec.request import time_minutes

_GPUS = re.compile(r"(?:^|,)gpu(?::[^:,()]+)?:(\d+)")
_UNLIMITED = ("UNLIMITED", "INFINITE", "NONE")


@dataclass(frozen=True)
class Partition:
    """What a partition allows: nodes in all, nodes per job, minutes per job, and each node's GPUs and CPUs."""

    name: str
    total_nodes: int
    max_nodes: int | None  # None: unlimited
    max_minutes: int | None  # None: unlimited
    node_gpus: tuple[int, ...]
    default: bool = False
    node_cpus: tuple[int, ...] = ()  # each node's CPUs (CPUTot); () when Slurm did not say them all


def read_partitions(slurm: SlurmClient) -> list[Partition]:
    """The cluster's partitions (`scontrol show partition` and `node`); HpcTrainError when Slurm does not answer."""
    conf = slurm.variable("SLURM_CONF")
    if conf is not None and not Path(conf).is_file():  # else scontrol looks for a controller in DNS, for seconds
        raise HpcTrainError(f"SLURM_CONF={conf!r} is not a file; point it at the cluster's slurm.conf "
                            "(hpc-train cluster env prints the local one's), or unset it to use the system's")
    shown = [slurm.show(kind) for kind in ("partition", "node")]
    for result in shown:
        if result.returncode != 0:
            where = f"SLURM_CONF={conf}" if conf else "the system's slurm.conf"
            raise HpcTrainError(f"Slurm does not answer with {where} ({last_words(result)}); point SLURM_CONF "
                                "at the cluster's slurm.conf (hpc-train cluster env), or start one with hpc-train "
                                "cluster up")
    return parse_partitions(shown[0].stdout, shown[1].stdout)


def find_partition(partitions: list[Partition], wanted: str | None) -> Partition | None:
    """The partition named `wanted`, or the default one when none is named; None when there is no such one."""
    return next((p for p in partitions if (p.name == wanted if wanted else p.default)), None)


def parse_partitions(partitions_text: str, nodes_text: str) -> list[Partition]:
    """Partitions from `scontrol show partition -o` and, for their GPUs and CPUs, `scontrol show node -o`."""
    gpus, cpus = node_gpus(nodes_text), node_cpus(nodes_text)
    found = []
    for line in partitions_text.splitlines():
        fields = slurm_fields(line)
        if "PartitionName" not in fields:
            continue
        names = hostlist.expand_hostlist(fields["Nodes"]) if fields.get("Nodes", "(null)") != "(null)" else []
        found.append(Partition(fields["PartitionName"], int(fields.get("TotalNodes", len(names))),
                               _count(fields.get("MaxNodes", "UNLIMITED")), _minutes(fields.get("MaxTime", "UNLIMITED")),
                               tuple(gpus.get(name, 0) for name in names), fields.get("Default") == "YES",
                               tuple(cpus[name] for name in names) if set(names) <= set(cpus) else ()))
    return found


def node_gpus(nodes_text: str) -> dict[str, int]:
    """Node name -> GPUs it declares (`Gres=gpu:2`, `gpu:a100:4(S:0-1)`, several kinds summed)."""
    counts = {}
    for line in nodes_text.splitlines():
        fields = slurm_fields(line)
        if "NodeName" in fields:
            counts[fields["NodeName"]] = sum(int(n) for n in _GPUS.findall(fields.get("Gres", "")))
    return counts


def node_cpus(nodes_text: str) -> dict[str, int]:
    """Node name -> its CPUs (`CPUTot=4`), for the nodes that say them."""
    counts = {}
    for line in nodes_text.splitlines():
        fields = slurm_fields(line)
        if "NodeName" in fields and fields.get("CPUTot", "").isdigit():
            counts[fields["NodeName"]] = int(fields["CPUTot"])
    return counts


def format_minutes(minutes: int) -> str:
    """Minutes as Slurm writes a time limit: [D-]HH:MM:00."""
    days, rest = divmod(minutes, 24 * 60)
    return f"{f'{days}-' if days else ''}{rest // 60:02d}:{rest % 60:02d}:00"


def _count(text: str) -> int | None:
    return None if text.upper() in _UNLIMITED or not text.isdigit() else int(text)


def _minutes(text: str) -> int | None:
    return None if text.upper() in _UNLIMITED else time_minutes(text)
