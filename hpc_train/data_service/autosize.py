"""`--data-workers auto`: how many data workers, decided epoch by epoch from the ledger's `input` share (pure).

The service starts with one worker (or the size an earlier attempt reached). At each epoch's end the job body
hands `decide` the input share of that epoch: the share of the training steps' time spent waiting on their input
(docs/goodput.md). One more worker is added while

- the share is over THRESHOLD (10%), and
- the last worker added helped: the share fell by MEANINGFUL (3 points) or more since the epoch before it, or a
  training step took FASTER (10%) less time on average (a rank that waits on its input nearly always keeps a share
  near 100% while a worker more may make its steps shorter: benchmarks/data_service_auto.py), and
- the job's limit is not reached (`worker_limit`: the CPUs the job holds beside its ranks, at most AUTO_MOST).

A worker that did not help, or the limit, settles the size for good (the next attempt starts there and adds no
more); a share under THRESHOLD leaves the size as it is, and a later epoch over it adds again. Each change, and
each end of growing, is one line (`Decision.line`), the share before and after in it: the interface of the log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from hpc_train.data_service.placement import node_cpus
from hpc_train.spec.data_service import AUTO_MOST

THRESHOLD = 0.10  # an input share over this is worth another worker
MEANINGFUL = 0.03  # the fall of the share (absolute) that says the last worker added helped
FASTER = 0.10  # ... or the fall of a training step's seconds (relative, the epoch's average) that says so


@dataclass(frozen=True)
class Sizing:
    """Where the sizing stands: the workers running, the most this job may run, the input share and a training
    step's average seconds in the last epoch before the last worker was added (None: no addition waits for its
    measure, or the seconds were not measured), and why it grows no more (None: it may)."""

    workers: int
    limit: int
    before: float | None = None
    settled: str | None = None
    before_seconds: float | None = None

    def record(self) -> dict[str, Any]:
        """As data_service.json keeps it for the next attempt."""
        return asdict(self)

    @classmethod
    def of_record(cls, record: Any, limit: int) -> Sizing:
        """An earlier attempt's sizing (data_service.json's `auto`), within this attempt's `limit`; one worker,
        nothing pending, when there is none or it is not one."""
        if not isinstance(record, Mapping):
            return cls(1, limit)
        workers, before, settled = record.get("workers"), record.get("before"), record.get("settled")
        whole = isinstance(workers, int) and not isinstance(workers, bool) and workers > 0
        workers = min(workers, limit) if whole else 1
        seconds = record.get("before_seconds")
        return cls(workers, limit, float(before) if isinstance(before, (int, float)) else None,
                   settled if isinstance(settled, str) else None,
                   float(seconds) if isinstance(seconds, (int, float)) and seconds > 0 else None)


@dataclass(frozen=True)
class Decision:
    """What an epoch's share decides: the sizing after it, and its one line (None: nothing changed, nothing said)."""

    sizing: Sizing
    line: str | None = None


def decide(sizing: Sizing, share: float, seconds: float | None = None) -> Decision:
    """The sizing after an epoch whose steps waited `share` (0 to 1) of their time on their input and took
    `seconds` each on average (None: not measured)."""
    if sizing.settled is not None:
        return Decision(sizing)
    pending = sizing.before
    measured = f"input {percent(share)} of the last epoch" + (
        f" ({percent(pending)} before worker {sizing.workers})" if pending is not None else "")
    faster = sped_up(sizing.before_seconds, seconds) if pending is not None else None
    measured += f", a step {faster:.0%} faster" if faster is not None and faster >= FASTER - 1e-9 else ""
    helped = (pending is None or pending - share >= MEANINGFUL - 1e-9  # (0.30 - 0.27 is 0.0299... in floats)
              or (faster is not None and faster >= FASTER - 1e-9))
    if share > THRESHOLD and helped and sizing.workers < sizing.limit:
        grown = replace(sizing, workers=sizing.workers + 1, before=share, before_seconds=seconds)
        return Decision(grown, f"data workers {sizing.workers} -> {grown.workers}: {measured}")
    if share <= THRESHOLD:
        if pending is None:
            return Decision(sizing)  # fed well enough, nothing added lately: nothing to say
        why = f"under {percent(THRESHOLD)}"
        return Decision(replace(sizing, before=None, before_seconds=None),
                        f"data workers stay at {sizing.workers}: {measured}: {why}")
    slower = "" if faster is None else f" nor a step's time by {FASTER:.0%}"
    why = (f"worker {sizing.workers} took it down by under {MEANINGFUL * 100:.0f} points{slower}" if not helped else
           f"{sizing.limit} is this job's most (its CPUs beside the ranks, at most {AUTO_MOST})")
    return Decision(replace(sizing, before=None, before_seconds=None, settled=why),
                    f"data workers stay at {sizing.workers}: {measured}: {why}")


def sped_up(before: float | None, after: float | None) -> float | None:
    """How much less time (a share of `before`) a training step took after than before; None when either was not
    measured."""
    if before is None or after is None or before <= 0 or after <= 0:
        return None
    return (before - after) / before


def percent(share: float) -> str:
    return f"{share:.0%}"


def job_cpus(text: str) -> int | None:
    """The CPUs SLURM_JOB_CPUS_PER_NODE says the job holds (`4(x2),2`: 10); None when it says nothing readable."""
    cpus = node_cpus(text)
    return sum(cpus) if cpus else None


def worker_limit(env: Mapping[str, str], tasks: int, cpus_per_worker: int, most: int = AUTO_MOST) -> int:
    """The most data workers the job can run beside its `tasks` ranks: the CPUs it holds (Slurm's
    SLURM_JOB_CPUS_PER_NODE) less the ranks' (SLURM_CPUS_PER_TASK each, 1 by default), in workers of
    `cpus_per_worker`; at most `most` (the ports its window holds), at least 1 (the one it starts with)."""
    held = job_cpus(env.get("SLURM_JOB_CPUS_PER_NODE", ""))
    if held is None:
        return most
    per_task = env.get("SLURM_CPUS_PER_TASK", "")
    ranks = tasks * (int(per_task) if per_task.isdigit() else 1)
    return max(1, min(most, (held - ranks) // max(1, cpus_per_worker)))


def last_epoch(record: Mapping[str, Any], since: float, seen: float = 0.0) -> tuple[float, float, float | None] | None:
    """The newest epoch in the ranks' measures (training/goodput.py's `epochs`) that began at `since` or later (a
    worker added mid-epoch would measure half of one) and ended after `seen` (the last one decided on), as (when it
    ended, its input share, a training step's average seconds, or None where not recorded); None while there is
    none. Per step, not per epoch: an attempt's first epoch measures fewer steps (its first call is start-up's, and
    a resumed one starts mid-epoch)."""
    epochs = record.get("epochs")
    found = None
    for epoch in epochs if isinstance(epochs, list) else ():
        try:
            share, began, ended = float(epoch["input_share"]), float(epoch["began"]), float(epoch["ended"])
        except (KeyError, TypeError, ValueError):
            continue
        if began >= since and ended > seen and (found is None or ended > found[0]):
            found = (ended, share, step_seconds(epoch))
    return found


def step_seconds(epoch: Mapping[str, Any]) -> float | None:
    """An epoch's training steps' seconds over its measured steps; None where either is missing or zero."""
    seconds, steps = epoch.get("steps_seconds"), epoch.get("steps")
    if not isinstance(seconds, (int, float)) or not isinstance(steps, int) or isinstance(steps, bool):
        return None
    return seconds / steps if seconds > 0 and steps > 0 else None
