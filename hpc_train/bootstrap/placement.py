"""Which node runs which rank: Slurm's block and cyclic task distributions.

Slurm numbers a step's tasks and places them on the step's nodes by its
distribution (``srun -m``). Only the first, node-level part of the distribution
decides that; the socket and core parts (``block:cyclic``) bind CPUs inside a
node and change no rank. Plane and arbitrary layouts need information a task
cannot see, so they are refused rather than guessed.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from hpc_train.errors import SlurmEnvError

# Slurm's word for "not given": its default node-level layout, block.
_DEFAULT_WORDS = frozenset({"", "*", "unknown"})


class Distribution(enum.Enum):
    BLOCK = "block"
    CYCLIC = "cyclic"


def parse_distribution(variable: str, value: str | None) -> Distribution:
    """Read ``SLURM_DISTRIBUTION`` (``cyclic``, ``block:cyclic``, ``block,Pack``...)."""
    node_level = (value or "").split(",")[0].split(":")[0].strip().lower()
    if node_level in _DEFAULT_WORDS:
        return Distribution.BLOCK
    try:
        return Distribution(node_level)
    except ValueError:
        raise SlurmEnvError(variable, value, f"the {node_level!r} task distribution is not supported",
                            "hpc-train places tasks for block and cyclic only; use srun -m block or -m cyclic") from None


def place_tasks(tasks_per_node: Sequence[int],
                distribution: Distribution) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Return, for every rank in order, its node index and its local index on that node."""
    if distribution is Distribution.BLOCK:
        return _place_block(tasks_per_node)
    return _place_cyclic(tasks_per_node)


def place_components(tasks_per_node: Sequence[int], distribution: Distribution,
                     component_nodes: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """`place_tasks` for a heterogeneous step: each component's ranks on its own nodes, component 0's first.

    Slurm applies the distribution inside each component (a cyclic step goes round component 0's nodes, then
    component 1's), so placing across the union would put ranks on the wrong component. `component_nodes`:
    how many of the step's nodes each component holds, in order; empty for a plain step.
    """
    if not component_nodes:
        return place_tasks(tasks_per_node, distribution)
    nodes: list[int] = []
    local: list[int] = []
    first = 0
    for count in component_nodes:
        inner_nodes, inner_local = place_tasks(tasks_per_node[first:first + count], distribution)
        nodes.extend(first + node for node in inner_nodes)
        local.extend(inner_local)
        first += count
    return tuple(nodes), tuple(local)


def _place_block(tasks_per_node: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    # Consecutive ranks fill one node before the next.
    nodes: list[int] = []
    local: list[int] = []
    for node, count in enumerate(tasks_per_node):
        nodes.extend([node] * count)
        local.extend(range(count))
    return tuple(nodes), tuple(local)


def _place_cyclic(tasks_per_node: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    # Round r gives one rank to every node that runs more than r tasks, in node
    # order; a node whose tasks are all placed is skipped, as Slurm does.
    nodes: list[int] = []
    local: list[int] = []
    for round_ in range(max(tasks_per_node, default=0)):
        for node, count in enumerate(tasks_per_node):
            if count > round_:
                nodes.append(node)
                local.append(round_)
    return tuple(nodes), tuple(local)
