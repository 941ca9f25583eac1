"""What a rank of the trainer says: progress on the chief's stdout, one line per rank on stderr (no TensorFlow)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from hpc_train.training.rank import RankInfo

Say = Callable[[str], None]  # one progress line, "hpc-train: " prefixed on the chief, nothing elsewhere


def log(rank: RankInfo, message: str) -> None:
    """One line per rank on stderr, for the job log (progress stays on the chief's stdout)."""
    print(f"hpc-train [{rank.type} {rank.index}]: {message}", file=sys.stderr, flush=True)


def printer(rank: RankInfo) -> Say:
    """Progress goes to stdout on the chief only; other ranks stay quiet."""
    if rank.is_chief:
        return lambda line: print(f"hpc-train: {line}", flush=True)
    return lambda line: None


def world(rank: RankInfo) -> str:
    """The job's ranks in words: "1 process", or "1 chief, 2 workers, 1 ps"."""
    if not rank.cluster:
        return "1 process"
    return ", ".join(f"{len(addresses)} {role}{'' if len(addresses) == 1 or role == 'ps' else 's'}"
                     for role, addresses in rank.cluster.items())
