"""A job's node range as the job body tells it to the ranks (RANGE_VARIABLE, SIZE_VARIABLE) and reads it back: the
trainer learns its size from the strategy; a user's command can read them (docs/jobs.md, "Node ranges"). What a
range is: spec/noderange.py (pure).
"""

from __future__ import annotations

from collections.abc import Mapping

from hpc_train.errors import HpcTrainError
from hpc_train.spec.noderange import NodeRange, parse_nodes, size_words

RANGE_VARIABLE = "HPC_TRAIN_NODE_RANGE"  # "2-4": the range the job asked for
SIZE_VARIABLE = "HPC_TRAIN_NODES"  # "3": the nodes this attempt runs on


def attempt_nodes(env: Mapping[str, str]) -> tuple[int, NodeRange] | None:
    """(this attempt's size, the job's range) from the environment the body gives the ranks; None without a range."""
    given, size = env.get(RANGE_VARIABLE), env.get(SIZE_VARIABLE, "")
    if not given or not size.isdigit():
        return None
    try:
        return int(size), parse_nodes(given)
    except HpcTrainError:
        return None


def size_field(env: Mapping[str, str]) -> dict[str, str]:
    """metrics.json's (and each epoch's) `nodes`: `on 3 of 2-4 nodes`; nothing for a job of a fixed size."""
    found = attempt_nodes(env)
    return {"nodes": size_words(*found)} if found else {}


def nodes_needed(env: Mapping[str, str], nodes_now: int) -> int:
    """The fewest nodes the next attempt may run on: the job's MIN with a range (the nodes beside the range's, a
    heterogeneous job's chief and ps, kept), else as many as this attempt had: 'never below MIN'."""
    found = attempt_nodes(env)
    if found is None:
        return nodes_now
    size, nodes = found
    return max(1, nodes_now - size + nodes.least)
