"""Resuming: the newest checkpoint that reads back whole, and a warning for each one that does not.

TensorFlow writes a checkpoint's files under temporary names and renames them
when complete, and CheckpointManager deletes old checkpoints only after a new
one is saved, so a crash never leaves a run without a good checkpoint. A file
damaged afterwards (a truncated copy, a full disk) is caught here by reading
every tensor before restoring; the next older checkpoint is used instead.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpc_train.training.keras import tf

_NUMBER = re.compile(r"ckpt-(\d+)\.index$")


def checkpoints_newest_first(directory: Path) -> list[tuple[int, str]]:
    """(epochs done, checkpoint prefix) of every checkpoint in `directory`, newest first."""
    found = [(int(match.group(1)), str(path)[:-len(".index")])
             for path in directory.glob("ckpt-*.index") if (match := _NUMBER.search(path.name))]
    return sorted(found, reverse=True)


def readable(prefix: str) -> str | None:
    """None if every tensor of the checkpoint reads back; else what went wrong."""
    try:
        reader = tf.train.load_checkpoint(prefix)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    # The reader reports damage in several ways: "Read less bytes than requested" is an IndexError.
    except (tf.errors.OpError, ValueError, IndexError, OSError, RuntimeError) as error:
        return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
    return None


def restore_newest(checkpoint: Any, directory: Path, say: Callable[[str], None]) -> int:
    """Restore the newest readable checkpoint; return the epochs it had finished (0: none)."""
    for epochs, prefix in checkpoints_newest_first(directory):
        problem = readable(prefix)
        if problem is None:
            checkpoint.restore(prefix)
            say(f"resuming after epoch {epochs} from {prefix}")
            return epochs
        print(f"hpc-train: warning: checkpoint {prefix} is damaged ({problem}); trying the one before it",
              file=sys.stderr, flush=True)
    return 0
