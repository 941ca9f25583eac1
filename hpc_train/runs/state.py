"""The run's state file, `state.json` in the output directory, written by the chief only.

It says whether the run is running, stopped (with its checkpoint, and why),
requeued or finished, so that people, `hpc-train status` and job scripts can
tell a finished run from one to resume. The input layout it records lets a
resumed run notice that the data order cannot continue exactly (more workers,
another batch size). Its `attempts` (the job's history of failures and retries,
attempts.py) are the batch script's, and outlive every state the chief writes.
No TensorFlow here.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

STATE_FILE = "state.json"
STATES = ("starting", "running", "stopped", "requeued", "finished", "pruned")
# Kept from the file when the chief writes a new state: the batch script's (prologue.py, epilogue.py, body.py).
# The job body's record of each attempt's end (attempts.record_end).
ENDED = "ended"
# A node range's attempts, each its size, as their prologues recorded them (attempts.note_size).
SIZES = "sizes"
CARRIED = ("attempts", "attempt", "max_retries", ENDED, SIZES)
# The chief's own, kept until it writes another: the input layout of the run that stopped (or was requeued, or
# failed) is what the run resuming it compares its own with (layout_changes, steps_kept_at_a_new_size).
LAYOUT = "layout"


def write_json_atomically(path: Path, value: Any) -> None:
    """Write, then rename: a reader never sees half a file, a crash never loses the old one."""
    write_text_atomically(path, json.dumps(value, indent=2) + "\n")


def write_text_atomically(path: Path, text: str) -> None:
    """Write, then rename (a file of the run folder that another process may be reading)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")  # (two processes may write it at once)
    partial.write_text(text)
    os.replace(partial, path)


def write_state(output: Path, state: str, **details: Any) -> None:
    if state not in STATES:
        raise ValueError(f"unknown run state {state!r}")
    earlier = read_state(output)
    carried = {key: earlier[key] for key in CARRIED if key in earlier}
    if LAYOUT in earlier and LAYOUT not in details:
        carried[LAYOUT] = earlier[LAYOUT]
    write_json_atomically(output / STATE_FILE, {"state": state, "time": round(time.time(), 3), **details, **carried})


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON object from a file, or {} when there is none, or it cannot be read, or it is not an object."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def read_state(output: Path) -> dict[str, Any]:
    """The last state written, or {} when there is none (or it cannot be read)."""
    return read_json_object(output / STATE_FILE)


# What changes with a job's size (a node range's attempts) while its global batch, and so its training, stays.
SIZE_KEYS = ("workers", "replicas", "per_replica_batch")


def layout_changes(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """'key a -> b' for each input-layout value that differs from the stopped run's; a change of size alone (the
    same global batch) is none: its global batches are the same (docs/jobs.md, "Node ranges")."""
    same = "global_batch" in now and before.get("global_batch") == now["global_batch"]
    return [f"{key} {before[key]} -> {now[key]}" for key in now
            if key in before and before[key] != now[key] and not (same and key in SIZE_KEYS)]


def steps_kept_at_a_new_size(before: dict[str, Any], global_batch: int, workers: int, steps: int) -> int:
    """The steps per epoch of a run resumed at another size (a node range's attempt): the stopped run's, when only
    the size changed (its global batch is the same), so that the epochs, and the schedule, stay where they were;
    else `steps`, what this size's data holds. (Under parameter_server, where a step is one worker's batch, the
    workers' shards of the data hold a few steps more or less at each size; the training streams repeat.)"""
    recorded = before.get("steps_per_epoch")
    if not recorded or before.get("global_batch") != global_batch or before.get("workers") in (None, workers):
        return steps
    return int(recorded)


# The job's tracked run (hpc_train/tracking): its id, store, and the last epoch logged. A file of its own, not
# state.json: the job body writes it while the chief writes state.json, and neither may lose the other's write.
TRACKING_FILE = "tracking.json"


def read_tracking(output: Path) -> dict[str, Any]:
    """What tracking.json says ({} when the job was never tracked)."""
    return read_json_object(Path(output) / TRACKING_FILE)


def write_tracking(output: Path, **fields: Any) -> None:
    """Add `fields` to tracking.json (one writer at a time: the job body, or `hpc-train track sync`)."""
    write_json_atomically(Path(output) / TRACKING_FILE, {**read_tracking(output), **fields})
