"""A job's nodes as a range, `--nodes MIN-MAX`: each attempt runs on as many nodes as Slurm gives it, from MIN to
MAX (pure; read at submit, in the job body and by the retry rule). How the job body tells the ranks the range and
the attempt's size (their environment's variables) is slurm/noderange.py's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hpc_train.errors import HpcTrainError

_RANGE = re.compile(r"^\s*(-?\d+)\s*(?:-\s*(-?\d+)\s*)?$")


@dataclass(frozen=True)
class NodeRange:
    """From `least` to `most` nodes (both included); one number when they are the same."""

    least: int
    most: int

    def __str__(self) -> str:
        return str(self.most) if self.least == self.most else f"{self.least}-{self.most}"

    @property
    def fixed(self) -> bool:
        return self.least == self.most

    def sizes(self) -> range:
        return range(self.least, self.most + 1)


def parse_nodes(text: object, option: str = "--nodes") -> NodeRange:
    """`4` or `2-4` as a NodeRange; one line for anything else (MIN > MAX, MIN < 1, not numbers)."""
    match = _RANGE.match(str(text)) if not isinstance(text, bool) else None
    if match is None:
        raise HpcTrainError(f"{option} {text!r}: expected a number of nodes (4) or a range MIN-MAX (2-4)")
    least = int(match.group(1))
    most = int(match.group(2)) if match.group(2) is not None else least
    if least < 1:
        raise HpcTrainError(f"{option} {text}: a job needs at least 1 node; ask for 1 or more")
    if least > most:
        raise HpcTrainError(f"{option} {text}: MIN {least} is more than MAX {most}; write the range as "
                            f"{most}-{least}")
    return NodeRange(least, most)


def size_words(size: int, nodes: NodeRange) -> str:
    """How the start line, status and list say an attempt's size: `on 3 of 2-4 nodes`."""
    return f"on {size} of {nodes} nodes"


def local_size(nodes: NodeRange, tasks_per_node: int, cpus: int) -> int:
    """The size of a --local run (every node a share of this machine): as many as its CPUs hold, MIN to MAX."""
    return max(nodes.least, min(nodes.most, cpus // max(1, tasks_per_node)))

