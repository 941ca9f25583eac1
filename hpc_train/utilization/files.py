"""Where a job's utilization is kept: the run folder's `utilization/`, the user's alone (0700, files 0600).

- `utilization/NODE.jsonl`: a line per sample of that node (`sample_row`'s), appended while the job runs, over
  every attempt;
- `utilization/ranks/NODE/RANK.json`: each rank's registration (its pid and the GPUs it is bound to), which the
  node's sampler reads;
- `utilization/data_service/NAME.jsonl`: a line per sample of one of the job's data service processes, which
  samples itself (utilization/service.py).
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FOLDER = "utilization"
PRIVATE_FOLDER = 0o700
PRIVATE_FILE = 0o600


@dataclass(frozen=True)
class RankEntry:
    """A rank as it registered: its process, its GPUs (None: every GPU of the node, nothing narrowed it), the
    attempt's step it belongs to (a requeued job's ranks register again), and the node's GPUs Slurm gave the step
    as the rank saw them before its binding (the job's too, even those no rank is bound to)."""

    rank: int
    pid: int
    gpus: tuple[str, ...] | None
    step: str
    allocated: tuple[str, ...] = ()


def folder(run_dir: Path) -> Path:
    return Path(run_dir) / FOLDER


def node_file(run_dir: Path, node: str) -> Path:
    return folder(run_dir) / f"{node}.jsonl"


def _private_folder(run_dir: Path, *parts: str) -> Path:
    """run_dir/FOLDER/parts..., each folder made the user's alone (mkdir's parents would not be); never the run
    folder itself: one removed meanwhile is not made again."""
    path = Path(run_dir)
    if not path.is_dir():
        raise FileNotFoundError(errno.ENOENT, "no run folder", str(path))
    for part in (FOLDER, *parts):
        path = path / part
        try:
            path.mkdir(mode=PRIVATE_FOLDER)
        except FileExistsError:
            pass  # made by an earlier sample, or by another rank of the node meanwhile
    return path


def register_rank(run_dir: Path, node: str, entry: RankEntry) -> None:
    """Write the rank's registration where its node's sampler looks."""
    ranks = _private_folder(run_dir, "ranks", node)
    text = json.dumps({"rank": entry.rank, "pid": entry.pid, "step": entry.step,
                       "gpus": None if entry.gpus is None else list(entry.gpus), "allocated": list(entry.allocated)})
    temporary = ranks / f".{entry.rank}.json.{os.getpid()}"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, PRIVATE_FILE)
    with os.fdopen(descriptor, "w") as out:
        out.write(text)
    os.replace(temporary, ranks / f"{entry.rank}.json")  # the sampler never reads half of it


def node_ranks(run_dir: Path, node: str, step: str) -> list[RankEntry]:
    """The ranks registered on `node` for this attempt's `step`, by rank."""
    entries = []
    for path in sorted((folder(run_dir) / "ranks" / node).glob("[0-9]*.json")):
        try:
            value = json.loads(path.read_text())
            gpus = value["gpus"]
            entry = RankEntry(int(value["rank"]), int(value["pid"]), None if gpus is None else tuple(map(str, gpus)),
                              str(value["step"]), tuple(map(str, value.get("allocated") or ())))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # one being replaced, or not ours
        if entry.step == step:
            entries.append(entry)
    return sorted(entries, key=lambda entry: entry.rank)


def append_row(run_dir: Path, node: str, row: dict[str, Any]) -> None:
    """One sample, one line, appended (O_APPEND: a line whole, even beside another attempt's sampler)."""
    _private_folder(run_dir)
    descriptor = os.open(node_file(run_dir, node), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW,
                         PRIVATE_FILE)
    with os.fdopen(descriptor, "a") as out:
        out.write(json.dumps(row, separators=(",", ":")) + "\n")


SERVICE_FOLDER = "data_service"


def append_service_row(run_dir: Path, name: str, row: dict[str, Any]) -> None:
    """One sample of the data service's process `name`, one line, appended to its own file (one writer each)."""
    descriptor = os.open(_private_folder(run_dir, SERVICE_FOLDER) / f"{name}.jsonl",
                         os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, PRIVATE_FILE)
    with os.fdopen(descriptor, "a") as out:
        out.write(json.dumps(row, separators=(",", ":")) + "\n")


def read_service_rows(run_dir: Path) -> list[dict[str, Any]]:
    """Every sample of the data service's processes, in time order; lines cut short or not ours skipped."""
    rows: list[dict[str, Any]] = []
    for path in sorted((folder(run_dir) / SERVICE_FOLDER).glob("*.jsonl")):
        try:
            rows += _samples(path.read_text().splitlines(), _a_service_sample)
        except OSError:
            continue
    return sorted(rows, key=lambda row: row["t"])


def parse_rows(lines: Sequence[str]) -> Iterator[dict[str, Any]]:
    """The samples in these lines; a line cut short (a node that died mid-write) or not ours skipped (pure)."""
    return _samples(lines, _a_node_sample)


def _samples(lines: Sequence[str], ours: Any) -> Iterator[dict[str, Any]]:
    """The lines' JSON objects for which `ours(row)`; a line cut short or another's skipped (pure)."""
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and ours(row):
            yield row


def _a_node_sample(row: dict[str, Any]) -> bool:
    return (isinstance(row.get("t"), (int, float)) and isinstance(row.get("node"), str)
            and isinstance(row.get("gpus", []), list) and isinstance(row.get("ranks", []), list))


def _a_service_sample(row: dict[str, Any]) -> bool:
    return (isinstance(row.get("t"), (int, float)) and isinstance(row.get("name"), str)
            and isinstance(row.get("cpu"), (int, float)))


def node_files(run_dir: Path) -> list[Path]:
    return sorted(folder(run_dir).glob("*.jsonl"))


def read_rows(run_dir: Path) -> list[dict[str, Any]]:
    """Every sample of every node, in time order."""
    rows: list[dict[str, Any]] = []
    for path in node_files(run_dir):
        try:
            rows.extend(parse_rows(path.read_text().splitlines()))
        except OSError:
            continue
    return sorted(rows, key=lambda row: row["t"])
