"""Idle GPUs and the status line, from a job's samples (pure).

A GPU is idle from the first of its latest samples all under `idle_below` percent; it is named once it has been
for `idle_after` seconds (both the job's settings, carried in each sample). A GPU is busy when its mean
utilization over the last minute of samples is over 50%. `fold` reads samples one at a time, so that the job
body's watch can keep up with a long job without reading its files again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

BUSY_PERCENT = 50.0
RECENT_SECONDS = 60.0  # the window of the busy mean


@dataclass(frozen=True)
class GpuState:
    """One GPU of the job, as its samples so far say."""

    node: str
    gpu: str
    ranks: tuple[int, ...]
    last: float  # the time of its latest sample
    utilization: float  # its latest utilization
    idle_since: float | None  # the first of its latest samples all under idle_below; None: the latest is busy
    recent: tuple[tuple[float, float], ...]  # (time, utilization) of the last RECENT_SECONDS
    idle_below: float
    idle_after: float
    every: float

    @property
    def idle_seconds(self) -> float:
        return 0.0 if self.idle_since is None else self.last - self.idle_since

    @property
    def idle(self) -> bool:
        """Idle long enough to be named."""
        return self.idle_since is not None and self.idle_seconds >= self.idle_after

    @property
    def recent_mean(self) -> float:
        return sum(value for _, value in self.recent) / len(self.recent) if self.recent else self.utilization

    @property
    def busy(self) -> bool:
        return self.recent_mean > BUSY_PERCENT


Key = tuple[str, str]  # (node, gpu)


def fold(states: Mapping[Key, GpuState], row: Mapping[str, Any]) -> dict[Key, GpuState]:
    """The GPUs' states after one more sample (rows come in time order per node)."""
    updated = dict(states)
    now, node = float(row["t"]), str(row["node"])
    try:
        below, after, every = (float(row.get(name, default)) for name, default in
                               (("idle_below", 5.0), ("idle_after", 300.0), ("every", 10.0)))
    except (TypeError, ValueError):
        return updated  # not a sample this version wrote: skipped
    for gpu in row.get("gpus") or ():
        try:
            key, value = (node, str(gpu["gpu"])), float(gpu["util"])
            ranks = tuple(int(rank) for rank in gpu.get("ranks") or ())
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        previous = updated.get(key)
        idle = value < below
        since = (previous.idle_since if previous is not None and previous.idle_since is not None else now) \
            if idle else None
        recent = tuple(point for point in (previous.recent if previous else ()) if point[0] > now - RECENT_SECONDS)
        updated[key] = GpuState(node, key[1], ranks, now, value, since, (*recent, (now, value)), below, after, every)
    return updated


def states_of(rows: Iterable[Mapping[str, Any]]) -> dict[Key, GpuState]:
    states: dict[Key, GpuState] = {}
    for row in rows:
        states = fold(states, row)
    return states


def span(seconds: float) -> str:
    """`6 min`, or `40 s` under a minute."""
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


def ranks_words(ranks: tuple[int, ...]) -> str:
    if not ranks:
        return "no rank"
    return f"rank{'s' if len(ranks) > 1 else ''} {','.join(map(str, ranks))}"


def idle_line(state: GpuState) -> str:
    """The one line naming an idle GPU: node, GPU, its ranks, for how long."""
    return (f"{state.node} GPU {state.gpu} ({ranks_words(state.ranks)}) idle for {span(state.idle_seconds)}: "
            f"under {state.idle_below:g}% since {_clock(state.idle_since)}")


def busy_again_line(state: GpuState, idle_for: float) -> str:
    return (f"{state.node} GPU {state.gpu} ({ranks_words(state.ranks)}) busy again ({state.utilization:.0f}%) after "
            f"{span(idle_for)} idle")


def _clock(when: float | None) -> str:
    import time

    return time.strftime("%H:%M:%S", time.localtime(when or 0))


def current(states: Mapping[Key, GpuState]) -> dict[Key, GpuState]:
    """The GPUs the latest samples name: a GPU of an earlier attempt's node, or one no longer bound, is left out."""
    if not states:
        return {}
    newest = max(state.last for state in states.values())
    return {key: state for key, state in states.items() if state.last >= newest - 2.5 * max(state.every, 1.0)}


def fresh(states: Mapping[Key, GpuState], now: float) -> bool:
    """Whether the samples are still coming (the job runs): the newest within three intervals (and 30 s) of now."""
    return bool(states) and now - max(state.last for state in states.values()) <= 3 * max(
        state.every for state in states.values()) + 30.0


def summary_line(states: Mapping[Key, GpuState]) -> str | None:
    """`GPUs: 6 of 8 busy over 50%; node2 GPU 1 idle for 6 min`; None without a GPU sampled."""
    gpus = current(states)
    if not gpus:
        return None
    ordered = sorted(gpus.values(), key=lambda state: (state.node, _number(state.gpu)))
    busy = sum(state.busy for state in ordered)
    idle = [f"{state.node} GPU {state.gpu} idle for {span(state.idle_seconds)}" for state in ordered if state.idle]
    return "; ".join([f"GPUs: {busy} of {len(ordered)} busy over {BUSY_PERCENT:g}%", *idle])


def idle_lines(states: Mapping[Key, GpuState]) -> list[str]:
    return [idle_line(state) for state in sorted(current(states).values(), key=lambda s: (s.node, _number(s.gpu)))
            if state.idle]


def _number(gpu: str) -> tuple[int, str]:
    return (int(gpu), "") if gpu.isdigit() else (1 << 30, gpu)
