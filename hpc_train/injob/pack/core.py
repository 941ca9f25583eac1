"""A packed sweep's scheduler, pure: the allocation's shares (slots), the trials' queue, which trial starts on
which share as another ends, and what a trial's end means (done, pruned, cancelled, retried elsewhere, failed).

Nothing here runs a step or reads a file: the edge (runner.py) asks `starts` what to launch, tells `ended` how a
step ended, and writes `as_json` where status reads it (runs/packed.py). Like HyperQueue's worker loop, it keeps
the allocation's bookkeeping apart from whatever submitted the work.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hpc_train.exitcodes import EXIT_LOST_PEER

WAITING, RUNNING, DONE, PRUNED, FAILED, CANCELLED = "waiting", "running", "done", "pruned", "failed", "cancelled"
NODE_LOST = "node lost"  # how a trial's step ended when a node it ran on was lost: it restarts, no retry spent
ENDED = (DONE, PRUNED, FAILED, CANCELLED)


@dataclass(frozen=True)
class Slot:
    """One share of the allocation: its number and its nodes (one node, or M whole nodes)."""

    index: int
    nodes: tuple[str, ...]


def slots_of(hosts: Sequence[str], share_nodes: int, per_node: int) -> tuple[Slot, ...]:
    """Every share of an allocation of `hosts`: `per_node` of one node each, or blocks of `share_nodes` whole
    nodes (a node left over by a block is not used). Slots on one node are next to each other (pure)."""
    if share_nodes > 1:
        return tuple(Slot(number, tuple(hosts[number * share_nodes:(number + 1) * share_nodes]))
                     for number in range(len(hosts) // share_nodes))
    return tuple(Slot(number, (hosts[number // per_node],)) for number in range(len(hosts) * per_node))


@dataclass(frozen=True)
class Trial:
    """One trial's place in the pack: its state, the slot it runs on, its attempts, the nodes to avoid (where it
    crashed), and each attempt's run (slot, nodes, start, end, how), the allocation's timeline."""

    index: int
    state: str = WAITING
    slot: int | None = None
    attempts: int = 0
    avoid: tuple[str, ...] = ()
    code: int | None = None
    runs: tuple[dict[str, Any], ...] = ()
    requeues: int = 0  # attempts that stopped on the time-limit warning: no retry spent on them
    losses: int = 0  # attempts ended by a node lost under them: no retry spent on them either


@dataclass(frozen=True)
class Start:
    """What the edge launches: trial `index`'s attempt `attempt` on `slot`."""

    index: int
    slot: Slot
    attempt: int


@dataclass(frozen=True)
class Released:
    """A node the pack gave back to Slurm: when, and how many trials were done there by then."""

    node: str
    at: float
    done: int


@dataclass(frozen=True)
class PackState:
    """The whole pack: the slots, every trial by index, the cap on trials at once, the retries a trial has, the
    order waiting trials start in (a retried or resumed one first, then new ones by index), and the nodes of the
    allocation that were lost (their slots are never offered again in this allocation), the nodes given back to
    Slurm (released: likewise), and those Slurm refused to take back (held to the end, never asked again)."""

    slots: tuple[Slot, ...]
    trials: tuple[Trial, ...]
    max_parallel: int | None = None
    max_retries: int = 0
    order: tuple[int, ...] = field(default=())
    lost: tuple[str, ...] = ()
    released: tuple[Released, ...] = ()
    refused: tuple[str, ...] = ()

    @classmethod
    def new(cls, slots: Sequence[Slot], count: int, max_parallel: int | None, max_retries: int) -> PackState:
        return cls(tuple(slots), tuple(Trial(index) for index in range(count)), max_parallel, max_retries,
                   tuple(range(count)))

    @property
    def running(self) -> list[Trial]:
        return [trial for trial in self.trials if trial.state == RUNNING]

    @property
    def finished(self) -> bool:
        return all(trial.state in ENDED for trial in self.trials)

    def free_slots(self) -> list[Slot]:
        taken = {trial.slot for trial in self.running}
        return [slot for slot in self.usable_slots() if slot.index not in taken]

    def usable_slots(self) -> list[Slot]:
        """The slots on no lost node and no node given back."""
        gone = {*self.lost, *self.gone}
        return [slot for slot in self.slots if not set(slot.nodes) & gone]

    @property
    def gone(self) -> list[str]:
        """The nodes given back to Slurm, in the order they went."""
        return [entry.node for entry in self.released]

    @property
    def stranded(self) -> bool:
        """Trials wait, none runs, and no slot is left to run them on: every share's node was lost."""
        return not self.running and not self.finished and not self.usable_slots()


def pick_slot(free: Sequence[Slot], avoid: Sequence[str], load: Mapping[str, int] | None = None,
              crashed_on: Sequence[int] = ()) -> Slot | None:
    """A free slot on none of the nodes to avoid, else one other than the shares it crashed on (`crashed_on`: its
    GPU may be the cause), else any free one (a crash is retried, even on its node, rather than left waiting); of
    those, one on the nodes running the fewest trials (`load`), the first such: trials spread over the allocation's
    nodes, the batch host's first, so that a cap below its shares still uses every node it holds (issue 46); None
    when none is free (pure)."""
    away = ([slot for slot in free if not set(slot.nodes) & set(avoid)]
            or [slot for slot in free if slot.index not in crashed_on] or list(free))
    if not away:
        return None
    load = load or {}
    return min(away, key=lambda slot: (sum(load.get(node, 0) for node in slot.nodes), slot.index))


def crashed_shares(trial: Trial) -> tuple[int, ...]:
    """The shares a trial's attempts crashed on (pure)."""
    return tuple(run["slot"] for run in trial.runs if run.get("how") == "crashed" and "slot" in run)


def node_load(state: PackState) -> dict[str, int]:
    """How many running trials each node of the allocation holds (pure)."""
    load = {node: 0 for slot in state.slots for node in slot.nodes}
    nodes = {slot.index: slot.nodes for slot in state.slots}
    for trial in state.running:
        for node in nodes.get(trial.slot, ()):
            load[node] += 1
    return load


def starts(state: PackState, now: float) -> tuple[PackState, list[Start]]:
    """Every trial that starts now: waiting ones in order, each on a free slot, up to the cap (pure)."""
    launched: list[Start] = []
    for index in state.order:
        trial = state.trials[index]
        if trial.state != WAITING:
            continue
        if state.max_parallel is not None and len(state.running) >= state.max_parallel:
            break
        slot = pick_slot(state.free_slots(), trial.avoid, node_load(state), crashed_shares(trial))
        if slot is None:
            break
        attempt = trial.attempts + 1
        run = {"attempt": attempt, "slot": slot.index, "nodes": list(slot.nodes), "started": round(now, 3)}
        state = _with(state, replace(trial, state=RUNNING, slot=slot.index, attempts=attempt,
                                     runs=(*trial.runs, run)))
        state = replace(state, order=tuple(number for number in state.order if number != index))
        launched.append(Start(index, slot, attempt))
    return state, launched


def to_release(state: PackState, hosts: Sequence[str], batch_host: str) -> list[str]:
    """The nodes of the allocation (`hosts`) the pack will not use again, to give back now (pure): every node but
    the batch host (Slurm cannot take it back: it runs the pack itself), those a running trial is on, and as few
    idle ones as the waiting trials need: enough free shares for as many as may start (under --max-parallel), with
    one away from each retry's crashed node where there is one, the batch host's shares counted first, then the
    idle nodes in order. A node left over by whole-node blocks, or lost, is never needed; one Slurm refused to take
    back is not asked again."""
    running = state.running
    busy = {trial.slot for trial in running}
    keep = {batch_host} | {node for slot in state.slots if slot.index in busy for node in slot.nodes}
    waiting = [state.trials[index] for index in state.order if state.trials[index].state == WAITING]
    room = len(waiting) if state.max_parallel is None else min(len(waiting), max(0, state.max_parallel - len(running)))
    idle = [slot for slot in state.usable_slots() if slot.index not in busy]
    retries = [trial.avoid for trial in waiting[:room] if trial.avoid]

    def enough(kept: set[str]) -> bool:
        free = [slot for slot in idle if set(slot.nodes) <= kept]
        return len(free) >= room and all(
            any(not set(slot.nodes) & set(avoid) for slot in free)
            or not any(not set(slot.nodes) & set(avoid) for slot in idle) for avoid in retries)

    for slot in idle:
        if enough(keep):
            break
        keep |= set(slot.nodes)
    return [node for node in dict.fromkeys(hosts)
            if node not in keep and node not in state.gone and node not in state.refused]


def nodes_released(state: PackState, nodes: Sequence[str], now: float) -> PackState:
    """Nodes given back to Slurm: no trial starts there again; each with the trials done there by now (pure)."""
    def done(node: str) -> int:
        return sum(1 for trial in state.trials for run in trial.runs
                   if run.get("how") == DONE and node in (run.get("nodes") or ()))

    return replace(state, released=(*state.released, *(Released(node, round(now, 3), done(node))
                                                       for node in nodes if node not in state.gone)))


def release_refused(state: PackState, nodes: Sequence[str]) -> PackState:
    """Nodes Slurm would not take back: the pack holds them to its end, without asking again (pure)."""
    return replace(state, refused=tuple(dict.fromkeys((*state.refused, *nodes))))


def worth_a_retry(code: int, command: bool, retry_exit_codes: Collection[int]) -> bool:
    """Whether a trial's failing exit is worth a retry, by the rule a job's own step follows (failures.py): a
    signal (it died under us) or a lost peer is; a program's own exit code is its verdict, retried only when listed
    in --retry-exit-codes (pure)."""
    return code in retry_exit_codes or code >= 128 or (not command and code == EXIT_LOST_PEER)


def ended(state: PackState, index: int, code: int, now: float, how: str | None = None, gpus: str = "",
          retry: bool = True) -> PackState:
    """Trial `index`'s step ended with `code`: `how` is what its run folder or the edge says (PRUNED, CANCELLED,
    "requeued": stopped by the time-limit warning, to resume first in the requeued job, or NODE_LOST: a node it
    ran on was lost, to restart first on another share without spending a retry; `gpus`: the GPUs Slurm gave its
    step, for the timeline); otherwise 0 is DONE,
    and a failure is retried on another share (its nodes avoided) while retries are left and it is worth one
    (`retry`), else FAILED (pure)."""
    trial = state.trials[index]
    how = how or (DONE if code == 0 else None)
    last = {**trial.runs[-1], "ended": round(now, 3), "exit": code, "how": how or "crashed",
            **({"gpus": gpus} if gpus else {})} if trial.runs else {}
    runs = (*trial.runs[:-1], last) if trial.runs else ()
    if how == "requeued":
        return _with(state, replace(trial, state=WAITING, slot=None, code=code, runs=runs,
                                    requeues=trial.requeues + 1), first=True)
    if how == NODE_LOST:
        return _with(state, replace(trial, state=WAITING, slot=None, code=code, runs=runs,
                                    losses=trial.losses + 1), first=True)
    if how is not None:
        return _with(state, replace(trial, state=how, slot=None, code=code, runs=runs))
    nodes = tuple(last.get("nodes") or ())
    if retry and trial.attempts - trial.requeues - trial.losses <= state.max_retries:
        retried = replace(trial, state=WAITING, slot=None, code=code, runs=runs,
                          avoid=tuple(dict.fromkeys((*trial.avoid, *nodes))))
        return _with(state, retried, first=True)
    return _with(state, replace(trial, state=FAILED, slot=None, code=code, runs=runs))


def end_words(before: Trial, after: Trial, how: str | None, code: int, max_retries: int, worth: bool,
              command: bool) -> str:
    """What the pack says of a trial's end, `before` and `after` it (pure)."""
    if after.state == WAITING and how == "requeued":
        return "stopped to resume later"
    if after.state == WAITING and how == NODE_LOST:
        return f"ended with its node (exit {code}); restarts on another share, no retry spent"
    if after.state == WAITING:
        return (f"crashed (exit {code}); retried on another share where one is free (attempt {before.attempts + 1} "
                f"of at most {max_retries + 1 + before.requeues + before.losses})")
    if after.state == FAILED and not worth and how is None:
        fix = ("list it in --retry-exit-codes to retry it" if command
               else "see its log; fix the cause, then resubmit (the trial resumes from its last checkpoint)")
        return f"failed (exit {code}); not retried: exit {code} is the program's own verdict, which a retry would " \
               f"repeat: {fix}"
    return f"failed (exit {code})" if after.state == FAILED else after.state


def nodes_lost(state: PackState, nodes: Sequence[str]) -> PackState:
    """Nodes of the allocation that were lost: no trial starts on them again in this allocation (pure)."""
    return replace(state, lost=tuple(dict.fromkeys((*state.lost, *nodes))))


def on_lost_node(state: PackState, index: int) -> bool:
    """Whether trial `index`'s newest run was on a node now lost (pure)."""
    runs = state.trials[index].runs
    return bool(runs) and bool(set(runs[-1].get("nodes") or ()) & set(state.lost))


def cancel_waiting(state: PackState, index: int) -> PackState:
    """A trial cancelled before it started: it never will (pure)."""
    trial = state.trials[index]
    return _with(state, replace(trial, state=CANCELLED)) if trial.state == WAITING else state


def _with(state: PackState, trial: Trial, first: bool = False) -> PackState:
    trials = tuple(trial if other.index == trial.index else other for other in state.trials)
    order = tuple(number for number in state.order if number != trial.index)
    if trial.state == WAITING:
        order = (trial.index, *order) if first else (*order, trial.index)
    return replace(state, trials=trials, order=order)


def as_json(state: PackState) -> dict[str, Any]:
    """What status and report read of the pack (runs/packed.py) (pure)."""
    return {"slots": [{"index": slot.index, "nodes": list(slot.nodes)} for slot in state.slots],
            "max_parallel": state.max_parallel, "max_retries": state.max_retries, "order": list(state.order),
            "lost": list(state.lost),
            "released": [{"node": entry.node, "at": entry.at, "done": entry.done} for entry in state.released],
            "refused": list(state.refused),
            "trials": [{"index": trial.index, "state": trial.state, "slot": trial.slot, "attempts": trial.attempts,
                        "avoid": list(trial.avoid), "code": trial.code, "runs": list(trial.runs),
                        "requeues": trial.requeues, "losses": trial.losses}
                       for trial in state.trials]}


def from_json(saved: Mapping[str, Any], slots: Sequence[Slot]) -> PackState:
    """A requeued job's pack, from what the last attempt wrote, on this attempt's slots: a trial that was running
    waits again, first, to resume from its checkpoint; the nodes the last allocation lost or gave back are not held
    against this one's, which Slurm gave as healthy and whole (pure)."""
    trials = []
    for entry in saved.get("trials", []):
        trial = Trial(int(entry["index"]), entry["state"], None, int(entry.get("attempts", 0)),
                      tuple(entry.get("avoid") or ()), entry.get("code"), tuple(entry.get("runs") or ()),
                      int(entry.get("requeues", 0)), int(entry.get("losses", 0)))
        trials.append(replace(trial, state=WAITING) if trial.state == RUNNING else trial)
    resumed = [trial.index for trial in trials if trial.state == WAITING and trial.attempts]
    order = [*resumed, *(number for number in saved.get("order", []) if number not in resumed)]
    order += [trial.index for trial in trials if trial.state == WAITING and trial.index not in order]
    return PackState(tuple(slots), tuple(trials), saved.get("max_parallel"), int(saved.get("max_retries", 0)),
                     tuple(order))
