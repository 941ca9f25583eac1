"""The goodput ledger (pure): where an allocation's wall time went, per attempt and in total.

An attempt's wall time (the job body's start to its end) is split into these categories, whose names are an
interface (ledger.json, `status`, `report`, docs/goodput.md):

- `startup`: the attempt's start to its first training steps done (srun, Python, TensorFlow, rendezvous, restore,
  the first step's tracing); a user's command: to its first beat;
- `input`: time training steps waited on the input pipeline;
- `compute`: the rest of the training steps, collectives included;
- `checkpoint`: the blocking part of saves;
- `evaluation`: validation;
- `lost`: a failed attempt's time from its last checkpoint (its steps thrown away) to its end;
- `idle`: the allocation held while no rank trained: from the end of training (the ranks' teardown; the final
  model's save and evaluation, measured, are theirs) or of the ranks, to the attempt's end;
- `other`: the rest, what none of the above explains.

Beside the allocation, not in it: `queued` (submit to the first start) and `requeued` (pending between attempts).
Goodput is `compute` over the allocation's wall time. What an attempt measured comes from its ranks (`Measured`,
written by the trainer's callback or the job body for a user's command); its start and end from the job body.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

CATEGORIES = ("startup", "input", "compute", "checkpoint", "evaluation", "lost", "idle", "other")
BESIDE = ("queued", "requeued")
# What a rank measures itself, cumulative over the attempt from its first steps on.
STEP_CATEGORIES = ("input", "compute", "checkpoint", "evaluation")
# The status line's shares after goodput, in this order (evaluation joins them when it is 1% or more).
LINE = ("input", "startup", "checkpoint", "lost", "idle", "other")


@dataclass(frozen=True)
class Measured:
    """What an attempt's ranks measured (seconds since the epoch for times, seconds for the rest).

    `totals`: STEP_CATEGORIES' seconds so far; `kept`: the same at the attempt's last checkpoint, with its `time`
    (what a failure does not throw away); `first_steps`: when the first steps were done; `last`: when it was
    last written; `trained`: when training ended.
    """

    first_steps: float | None = None
    totals: Mapping[str, float] = field(default_factory=dict)
    kept: Mapping[str, float] | None = None
    last: float | None = None
    trained: float | None = None  # when training ended (fit returned), if it did
    after: float = 0.0  # the step categories' seconds measured after that (the final model's save, evaluation)

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> "Measured":
        """From its JSON record (ledger measures files); what is missing or not a number is not measured."""
        totals = _seconds(record.get("totals"))
        kept = _seconds(record.get("kept")) if isinstance(record.get("kept"), Mapping) else None
        if kept is not None and not isinstance(record["kept"].get("time"), (int, float)):
            kept = None
        return cls(_number(record.get("first_steps")), totals,
                   None if kept is None else {**kept, "time": float(record["kept"]["time"])},
                   _number(record.get("last")), _number(record.get("trained")), _number(record.get("after")) or 0.0)


@dataclass(frozen=True)
class Attempt:
    """One attempt of the job: its allocation's start and end, what it held, how it ended and what it measured.

    `ranks_ended`: when the step (every rank) ended; `failed`: a failure ended it (its steps since the last
    checkpoint are thrown away); `running`: `ended` is now, not an end.
    """

    number: int
    started: float
    ended: float
    nodes: int = 1
    gpus: int = 0
    failed: bool = False
    ranks_ended: float | None = None
    measured: Measured = Measured()
    running: bool = False

    @property
    def wall(self) -> float:
        return max(0.0, self.ended - self.started)


def attempt_seconds(attempt: Attempt) -> dict[str, float]:
    """The attempt's wall time in CATEGORIES; they add up to its wall time (`other` takes the rest, never < 0)."""
    seconds = dict.fromkeys(CATEGORIES, 0.0)
    measured = attempt.measured
    trained_until = attempt.ranks_ended if attempt.ranks_ended is not None else attempt.ended
    trained_until = min(trained_until, attempt.ended)
    if measured.first_steps is None:  # never trained: all of it start-up until the ranks ended
        seconds["startup"] = _span(attempt.started, trained_until)
        rest = _span(trained_until, attempt.ended)
        seconds["lost" if attempt.failed else "idle"] = rest
        return _with_other(seconds, attempt.wall)
    seconds["startup"] = _span(attempt.started, min(measured.first_steps, attempt.ended))
    if attempt.failed:
        kept = measured.kept or {"time": measured.first_steps}
        seconds.update({name: kept.get(name, 0.0) for name in STEP_CATEGORIES})
        seconds["lost"] = _span(max(kept["time"], attempt.started), attempt.ended)
    else:  # idle from when training ended (the final model's save, the teardown) or the ranks did
        seconds.update({name: measured.totals.get(name, 0.0) for name in STEP_CATEGORIES})
        ended_training = min(measured.trained, trained_until) if measured.trained is not None else trained_until
        seconds["idle"] = max(0.0, _span(max(ended_training, measured.first_steps), attempt.ended) - measured.after)
    return _with_other(seconds, attempt.wall)


def ledger(attempts: Sequence[Attempt], submitted: float | None = None) -> dict[str, Any]:
    """ledger.json's content: each attempt's seconds, their total, the time beside the allocation, node-seconds
    and GPU-seconds held, and goodput (compute over the allocation's wall time; None before any)."""
    ordered = sorted(attempts, key=lambda attempt: attempt.number)
    rows = []
    for attempt in ordered:
        row = {"attempt": attempt.number, "started": round(attempt.started, 3), "wall": round(attempt.wall, 3),
               "nodes": attempt.nodes, "gpus": attempt.gpus,
               **{name: round(value, 3) for name, value in attempt_seconds(attempt).items()}}
        rows.append({**row, **({"running": True} if attempt.running else {})})
    wall = sum(attempt.wall for attempt in ordered)
    total = {name: round(sum(row[name] for row in rows), 3) for name in CATEGORIES}
    beside = {"queued": round(_span(submitted, ordered[0].started), 3) if ordered and submitted else 0.0,
              "requeued": round(sum(_span(before.ended, after.started)
                                    for before, after in zip(ordered, ordered[1:])), 3)}
    return {"attempts": rows, "total": {**total, "wall": round(wall, 3)}, **beside,
            "node_seconds": round(sum(attempt.wall * attempt.nodes for attempt in ordered), 3),
            "gpu_seconds": round(sum(attempt.wall * attempt.gpus for attempt in ordered), 3),
            "goodput": round(total["compute"] / wall, 4) if wall > 0 else None}


def idle_slots(slots: Sequence[tuple[int, Sequence[tuple[float, float]]]], start: float, end: float) -> float:
    """A pack's node-seconds with no trial on them, from `start` to `end`: each slot's (its nodes, its trials'
    runs as (start, end)) time without a run, times its nodes."""
    idle = 0.0
    for nodes, runs in slots:
        busy = sum(_span(max(begin, start), min(finish, end)) for begin, finish in runs)
        idle += max(0.0, (end - start) - busy) * nodes
    return idle


def shares(seconds: Mapping[str, float]) -> dict[str, float]:
    """Each category's share (0 to 1) of the wall time its seconds add up to."""
    wall = sum(seconds.get(name, 0.0) for name in CATEGORIES)
    return {name: (seconds.get(name, 0.0) / wall if wall > 0 else 0.0) for name in CATEGORIES}


def status_line(seconds: Mapping[str, float]) -> str | None:
    """`goodput 71%: input 18%, startup 6%, checkpoint 2%, lost 0%, idle 1%, other 2%`; None before any time."""
    if sum(seconds.get(name, 0.0) for name in CATEGORIES) <= 0:
        return None
    share = shares(seconds)
    names = [*LINE[:3], "evaluation", *LINE[3:]] if round(share["evaluation"] * 100) >= 1 else list(LINE)
    return f"goodput {share['compute']:.0%}: " + ", ".join(f"{name} {share[name]:.0%}" for name in names)


def input_share(input_seconds: float, compute_seconds: float) -> float:
    """The share of training steps' time spent waiting on the input pipeline (0 when nothing was timed)."""
    steps = input_seconds + compute_seconds
    return input_seconds / steps if steps > 0 else 0.0


def _with_other(seconds: dict[str, float], wall: float) -> dict[str, float]:
    """`other` the wall time's rest; measured parts that overrun the wall time (clocks of two hosts) shrink."""
    known = sum(value for name, value in seconds.items() if name != "other")
    if known > wall > 0:
        seconds = {name: value * wall / known for name, value in seconds.items()}
        known = wall
    return {**seconds, "other": max(0.0, wall - known)}


def _span(start: float | None, end: float | None) -> float:
    return max(0.0, end - start) if start is not None and end is not None else 0.0


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _seconds(value: Any) -> dict[str, float]:
    if not isinstance(value, Mapping):
        return {}
    return {name: max(0.0, float(value[name])) for name in STEP_CATEGORIES if _number(value.get(name)) is not None}
