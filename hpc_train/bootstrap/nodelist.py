"""Slurm's variable values, parsed: node lists, tasks per node, reserved ports, counts.

Pure functions over strings. Node lists are expanded by python-hostlist in the
order Slurm gives them (never sorted: Slurm's order is the rank order), and any
problem becomes a `SlurmEnvError` naming the variable it came from.
"""

from __future__ import annotations

from collections.abc import Mapping

import hostlist

from hpc_train.errors import SlurmEnvError

NODELIST_EXAMPLE = "node[1-4],gpu07"


def expand_nodelist(variable: str, value: str) -> tuple[str, ...]:
    """Expand a Slurm node list such as ``node[9-10],gpu[001-002]`` in Slurm's order."""
    if not value.strip():
        raise SlurmEnvError(variable, value, "the node list is empty",
                            f"expected a Slurm node list such as {NODELIST_EXAMPLE!r}")
    try:
        # Duplicates are kept here so that we can refuse them instead of
        # silently shifting every later node's ranks.
        nodes = hostlist.expand_hostlist(value, allow_duplicates=True)
    except hostlist.BadHostlist as error:
        raise SlurmEnvError(variable, value, f"not a valid Slurm node list ({error})",
                            f"expected a list such as {NODELIST_EXAMPLE!r}, as Slurm sets it") from None
    if not nodes:
        raise SlurmEnvError(variable, value, "the node list names no node",
                            f"expected a Slurm node list such as {NODELIST_EXAMPLE!r}")
    duplicate = _first_duplicate(nodes)
    if duplicate is not None:
        raise SlurmEnvError(variable, value, f"node {duplicate!r} is listed twice",
                            "a step's node list names each node once; is the variable hand-made?")
    return tuple(nodes)


def expand_tasks_per_node(variable: str, value: str) -> tuple[int, ...]:
    """Expand Slurm's tasks-per-node form ``2(x3),1`` to ``(2, 2, 2, 1)``."""
    try:
        counts = hostlist.parse_slurm_tasks_per_node(value.strip())
    except (hostlist.BadHostlist, ValueError):
        raise SlurmEnvError(variable, value, "not a Slurm tasks-per-node list",
                            "expected counts such as '2(x3),1' (2 tasks on each of 3 nodes, then 1)") from None
    if not counts or min(counts) < 1:
        raise SlurmEnvError(variable, value, "every node of a step runs at least one task",
                            "expected counts such as '2(x3),1'")
    return tuple(counts)


def expand_port_list(variable: str, value: str) -> tuple[int, ...]:
    """Expand a reserved-port list such as ``12000-12003,12010`` in its own order."""
    ports: list[int] = []
    for part in value.split(","):
        low, dash, high = part.strip().partition("-")
        try:
            first, last = int(low), int(high if dash else low)
        except ValueError:
            raise SlurmEnvError(variable, value, f"{part!r} is not a port or a port range",
                                "expected ports such as '12000-12003,12010', as srun --resv-ports sets them") from None
        if not 0 < first <= last <= 65535:
            raise SlurmEnvError(variable, value, f"{part!r} is not a range of ports 1-65535",
                                "expected ports such as '12000-12003'")
        ports.extend(range(first, last + 1))
    return tuple(ports)


def optional_count(env: Mapping[str, str], name: str) -> int | None:
    """A whole number of 0 or more that Slurm may set, or None when it is not set."""
    value = env.get(name)
    if value is None:
        return None
    if not value.strip().isdigit():
        raise SlurmEnvError(name, value, "not a whole number (0 or more)", "Slurm sets it to one; is it hand-set?")
    return int(value)


def _first_duplicate(names: list[str]) -> str | None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None
