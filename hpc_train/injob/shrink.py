"""A node range's retry inside its own allocation: a job of `--nodes MIN-MAX` whose failed step blamed a node gives
that node back to Slurm (its resize of the running job, pack/release.py's give_back) and runs its next attempt at once
on the nodes it kept, never below MIN, instead of requeueing and waiting in the queue for an allocation again.

The choice is pure (`choose`); the epilogue asks it once a retry is planned (retry.py), and the body runs the next
attempt in the same allocation with the resized job's variables. It is not for:
- a job of a fixed size (its next attempt needs as many nodes: the requeue finds it a healthy one), a heterogeneous
  job, a script from before the job body (it has no loop to go on in): they requeue as before;
- a failure that blamed no node this job still holds (nothing to give back): requeued as before;
- the batch host (the node running the body: Slurm cannot take it back, "Invalid node name specified") or a shrink
  below MIN: the job is requeued, which gives the whole allocation back, and one line says why.

Slurm's SLURM_RESTART_COUNT counts only its own restarts, so the body counts the attempts by it and the retries made
inside an allocation (`counted_restarts`): every record and line numbers the attempts as a requeue's would.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hpc_train.runs.requeue import restart_count

RESTART_VARIABLE = "SLURM_RESTART_COUNT"
# The history's mark of a retry made inside the allocation (attempts.record's entry): Slurm did not count it.
IN_ALLOCATION = "in_allocation"


@dataclass(frozen=True)
class Shrink:
    """What a retry does with the nodes it blamed: give `release` back and go on with `kept`; or, `why_not`, requeue
    (said in one line) because a blamed node cannot go or the next attempt would need it."""

    release: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    why_not: str = ""

    @property
    def goes_on_here(self) -> bool:
        return bool(self.release) and not self.why_not


def choose(ranged: bool, retry: bool, exclude: Sequence[str], nodes: Sequence[str], batch_host: str,
           least: int) -> Shrink | None:
    """Whether a retry of a job on `nodes` (this allocation's) goes on here without the nodes it `exclude`s (pure):
    None when this is not a node range's retry that gives back a node it holds (the job requeues as before);
    else the nodes to give back and those kept, or why the job requeues instead. `least`: the range's MIN."""
    blamed = tuple(node for node in nodes if node in set(exclude))
    if not ranged or not retry or not blamed:
        return None
    if batch_host in blamed:
        return Shrink(why_not=f"{batch_host} not given back while the job runs: it runs the batch script, which "
                              "Slurm cannot take from a running job; the job is requeued without it")
    kept = tuple(node for node in nodes if node not in blamed)
    if len(kept) < least:
        return Shrink(why_not=f"{', '.join(blamed)} not given back while the job runs: its next attempt needs "
                              f"{least} node(s) and {len(kept)} would be left here; the job is requeued without "
                              f"{'it' if len(blamed) == 1 else 'them'}")
    return Shrink(blamed, kept)


def released_line(nodes: Sequence[str], at: float, attempt: int, kept: int, node_range: str) -> str:
    """`released node10 at 13:05:22, excluded after attempt 1 failed; attempt 2 goes on with 3 of 2-4 nodes` (pure
    but for the local time of day: the pack's form, runs/packed.py)."""
    when = time.strftime("%H:%M:%S", time.localtime(at))
    return (f"released {', '.join(nodes)} at {when}, excluded after attempt {attempt} failed; attempt {attempt + 1} "
            f"goes on in this allocation with {kept} of {node_range} nodes")


def retries_here(history: Sequence[Mapping[str, Any]]) -> int:
    """The retries made inside an allocation so far (pure)."""
    return sum(1 for entry in history if entry.get(IN_ALLOCATION))


def counted_restarts(env: Mapping[str, str], slurms: Mapping[str, str], history: Sequence[Mapping[str, Any]]
                     ) -> dict[str, str]:
    """`env` with SLURM_RESTART_COUNT the attempts before this one: Slurm's own count (`slurms`, the environment it
    gave the batch script) and the retries made inside an allocation (pure)."""
    if not slurms.get("SLURM_JOB_ID"):
        return dict(env)
    return {**env, RESTART_VARIABLE: str(restart_count(slurms) + retries_here(history))}
