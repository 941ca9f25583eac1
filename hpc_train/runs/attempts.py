"""A run's attempts: the notes a failing rank leaves, and the job's history of failures and retries.

A rank that fails knowing why (it lost contact with a peer, the user's
function raised, its command died of a signal) leaves a note in the run folder
(`.failures/rank-R.json`) before it exits; a rank killed outright leaves none,
and srun's own lines tell instead (failures.py). After a failed step the batch
script's epilogue reads the notes, decides (retry.py), appends the attempt to
state.json's `attempts` and removes the notes. The next attempt's prologue
records a restart nobody explained (a node lost: Slurm requeued the job
itself), and the resumed trainer adds when training went on and what the
failure cost. Reading never raises: a missing or damaged file is no history.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpc_train.runs.metrics import metrics_path
from hpc_train.runs.state import ENDED, SIZES, STATE_FILE, read_json_object, read_state, write_json_atomically

NOTES = ".failures"
# The chief's last step and when (at most every few seconds): how many steps a failure makes the run redo.
PROGRESS_FILE = ".progress.json"
# Kinds of failure a rank can note; the first three are worth a retry, the last two would fail again.
NOTE_KINDS = ("lost_peer", "signal", "exit", "task_error", "refused", "hung")
# The job body's watchdog's note (injob/watchdog.py): no rank made progress; beside the ranks' own, never theirs.
HANG_NOTE = "hung.json"


def note_failure(run_dir: str | os.PathLike[str], kind: str, message: str, peers: tuple[str, ...] = (),
                 environ: Mapping[str, str] | None = None, **details: Any) -> None:
    """Leave this rank's note on why it fails. Never raises: a rank on its way out must not fail on its note.

    `peers`: the hosts of the peers it lost contact with ("node2"), for the node to blame.
    """
    env = os.environ if environ is None else environ
    rank = env.get("SLURM_PROCID", "0")
    note = {"rank": int(rank) if rank.isdigit() else 0, "node": env.get("SLURMD_NODENAME") or socket.gethostname(),
            "kind": kind, "message": message.strip()[:500], "peers": list(peers), "time": round(time.time(), 3),
            **details}
    try:
        write_json_atomically(Path(run_dir) / NOTES / f"rank-{note['rank']}.json", note)
    except OSError:
        pass


def note_hang(run_dir: Path, cause: str, seconds: float) -> None:
    """The watchdog's note that the attempt hung (failures.py reads it before the ranks' own). Never raises."""
    note = {"rank": -1, "node": socket.gethostname(), "kind": "hung", "message": cause, "peers": [],
            "seconds": seconds, "time": round(time.time(), 3)}
    try:
        write_json_atomically(Path(run_dir) / NOTES / HANG_NOTE, note)
    except OSError:
        pass


def read_notes(run_dir: Path) -> list[dict[str, Any]]:
    """The notes this attempt's ranks (and the watchdog, rank -1) left, by rank."""
    notes = []
    for path in sorted([*(run_dir / NOTES).glob("rank-*.json"), run_dir / NOTES / HANG_NOTE]):
        try:
            note = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(note, dict) and note.get("kind") in NOTE_KINDS:
            notes.append(note)
    return sorted(notes, key=lambda note: note.get("rank", 0))


def clear_notes(run_dir: Path) -> None:
    for path in [*(run_dir / NOTES).glob("rank-*.json"), run_dir / NOTES / HANG_NOTE]:
        path.unlink(missing_ok=True)


def history(run_dir: Path) -> list[dict[str, Any]]:
    """The attempts recorded so far, oldest first."""
    return recorded(read_state(run_dir))


def recorded(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The attempts a state.json already read records, oldest first."""
    attempts = state.get("attempts", [])
    return [attempt for attempt in attempts if isinstance(attempt, dict)] if isinstance(attempts, list) else []


def record(run_dir: Path, attempt: dict[str, Any]) -> None:
    """Append an attempt to state.json's history, keeping whatever else the file says."""
    state = read_state(run_dir)
    write_json_atomically(run_dir / STATE_FILE, {**state, "attempts": [*history(run_dir), attempt]})


def withdraw(run_dir: Path, attempt: dict[str, Any]) -> None:
    """Take back an entry recorded ahead of what it says (a requeue that Slurm then refused): the newest equal
    one, if it is there."""
    state = read_state(run_dir)
    entries = recorded(state)
    if attempt in entries:
        del entries[len(entries) - 1 - entries[::-1].index(attempt)]
        write_json_atomically(run_dir / STATE_FILE, {**state, "attempts": entries})


def withdraw_newest_requeue(run_dir: Path) -> None:
    """withdraw() the newest time-limit requeue, if the history has one (a rank in an image recorded it on asking
    the job body, which Slurm then refused)."""
    requeues = [entry for entry in history(run_dir) if entry.get("action") == "requeued"]
    if requeues:
        withdraw(run_dir, requeues[-1])


def update_last(run_dir: Path, **fields: Any) -> None:
    """Add fields to the newest attempt (the resumed run's `resumed_at`, `seconds_lost`)."""
    state = read_state(run_dir)
    attempts = history(run_dir)
    if attempts:
        attempts[-1] = {**attempts[-1], **fields}
        write_json_atomically(run_dir / STATE_FILE, {**state, "attempts": attempts})


def retries_used(attempts: list[dict[str, Any]]) -> int:
    """Restarts that followed a failure (retried by hpc-train, or requeued by Slurm for a lost node)."""
    return sum(1 for attempt in attempts if attempt.get("action") in ("retried", "requeued by Slurm"))


def requeues_done(attempts: list[dict[str, Any]]) -> int:
    """Restarts that were not retries: requeues for the time-limit warning, and those Slurm made by itself
    for no failure (max_requeues counts these)."""
    return sum(1 for attempt in attempts if attempt.get("action") in ("requeued", "restarted"))


def attempts_allowed(attempts: list[dict[str, Any]], max_retries: int) -> int:
    """How many attempts the job may make as things stand: the first, one per retry allowed, and one per
    restart that was not a retry (time-limit requeues)."""
    return 1 + max(0, max_retries) + requeues_done(attempts)


def failures(attempts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries that are failures (retried, requeued by Slurm for a lost node, or final)."""
    return [attempt for attempt in attempts if attempt.get("action") in ("retried", "requeued by Slurm", "failed")]


def requeue_entry(attempt: int, global_step: int | None = None) -> dict[str, Any]:
    """The history's entry for a job that saved and requeued itself on the time-limit warning."""
    entry: dict[str, Any] = {"time": round(time.time(), 3), "attempt": attempt, "kind": "time_limit",
                             "cause": "the time-limit warning", "after": "the time-limit warning",
                             "action": "requeued", "excluded": []}
    if global_step is not None:
        entry["checkpoint_step"] = global_step
    return entry


def write_progress(run_dir: Path, global_step: int) -> None:
    try:
        write_json_atomically(run_dir / PROGRESS_FILE, {"global_step": global_step, "time": round(time.time(), 3)})
    except OSError:
        pass


def read_progress(run_dir: Path) -> dict[str, Any]:
    return read_json_object(run_dir / PROGRESS_FILE)


def describe(attempt: dict[str, Any], failed: int, total: int | None = None) -> str:
    """A recorded failure (of attempt number `failed`) as `hpc-train status` and the log say it: "attempt 2 of 4:
    retried after node2 task 1 was killed; node2 excluded; resumed at step 1,240 (37 steps redone)", or
    "attempt 4 of 4 failed: node2 task 1: Killed; retries exhausted (3 of 3)"."""
    out_of = f" of {total}" if total else ""
    cause = attempt.get("cause", "an unknown failure")
    if attempt.get("action") == "failed":
        parts = [f"attempt {failed}{out_of} failed: {cause}"]
    elif attempt.get("action") in ("restarted", "requeued"):
        parts = [f"attempt {failed + 1}{out_of}: {attempt.get('after', cause)}"]
    else:
        how = "requeued by Slurm" if attempt.get("action") == "requeued by Slurm" else "retried"
        parts = [f"attempt {failed + 1}{out_of}: {how} after {attempt.get('after', cause)}"]
    if attempt.get("excluded"):
        parts.append(f"{','.join(attempt['excluded'])} excluded")
    if attempt.get("why"):
        parts.append(str(attempt["why"]))
    if isinstance(attempt.get("checkpoint_step"), int) and attempt.get("action") != "failed":
        redone = attempt.get("steps_redone")
        parts.append(f"resumed at step {attempt['checkpoint_step']:,}"
                     + (f" ({redone:,} steps redone)" if isinstance(redone, int) else ""))
    if isinstance(attempt.get("seconds_lost"), (int, float)):
        parts.append(f"{attempt['seconds_lost']:.0f} s lost")
    if attempt.get("released") and isinstance(attempt.get("released_at"), (int, float)):  # (injob/shrink.py)
        parts.append(f"released {', '.join(attempt['released'])} at "
                     f"{time.strftime('%H:%M:%S', time.localtime(attempt['released_at']))}, in its allocation")
    return "; ".join(parts)


def count_failure_cost(output: Path) -> dict[str, Any]:
    """Once a retried run trains again: what its last failure cost (from the checkpoint it resumed from to now),
    into the history; and every failure's count and cost so far, for metrics.json."""
    attempts = history(output)
    last = attempts[-1] if attempts else {}
    if last.get("action") in ("retried", "requeued by Slurm") and "resumed_at" not in last:
        now = time.time()
        since = last.get("checkpoint_time") or last.get("time") or now
        update_last(output, resumed_at=round(now, 3), seconds_lost=round(max(0.0, now - since), 1))
        attempts = history(output)
    failed = failures(attempts)
    return {"count": len(failed), "seconds_lost": round(sum(attempt.get("seconds_lost", 0) for attempt in failed), 1)}


# state.json's ENDED: the job body's record of each attempt's end (injob/body.py): when it started and ended, on which
# nodes, the job's exit code then, and whether the job goes on (retried or requeued). Once Slurm forgets a job
# (MinJobAge, and no accounting), what status, list and report read (views.py).
def ended_attempts(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The attempts whose end the job body recorded, oldest first."""
    ended = state.get(ENDED, [])
    return [entry for entry in ended if isinstance(entry, dict)] if isinstance(ended, list) else []


def record_end(run_dir: Path, attempt: int, nodes: str, started: float, exit_code: int, goes_on: bool,
               finished: bool = False, tasks: str | None = None, signal_number: int | None = None) -> None:
    """The attempt's end into state.json (one write; never raises). `finished`: a user's command succeeded, and its
    state says so (the trainer writes its own; nothing else would). `tasks`: the attempt's (a node range's differ).
    `signal_number`: the body was ended by it (Slurm's SIGTERM: a cancel, the time limit, a requeue)."""
    state = read_state(run_dir)
    if any(end.get("attempt") == attempt for end in ended_attempts(state)):
        return  # recorded already: Slurm's SIGTERM after the body's own end (onterm.ending_on_term) leaves it be
    entry = {"attempt": attempt, "nodes": nodes, **({"tasks": tasks} if tasks else {}), "started": round(started, 3),
             "ended": round(time.time(), 3), "exit": exit_code, "goes_on": goes_on,
             **({"signal": signal_number} if signal_number else {})}
    done = {"state": "finished", "time": entry["ended"]} if finished and state.get("state") in (
        None, "starting", "running") else {}
    try:
        write_json_atomically(run_dir / STATE_FILE, {**state, **done, ENDED: [*ended_attempts(state), entry]})
    except OSError:
        pass  # a job that ends must not fail on its record (status then says what Slurm says, or unknown)


def unended(state: Mapping[str, Any], last_seen: float) -> dict[str, Any] | None:
    """The previous attempt as its end would have been recorded, when its body could not record it (killed with
    its job: `scontrol requeue`, a preemption, a lost batch host): its prologue's record (number, nodes, tasks,
    start), ended when it was last seen (`last_seen`: its run folder's newest write), going on (a next attempt
    runs); None when its end is recorded, or no attempt started (pure)."""
    started = state.get("attempt") if isinstance(state.get("attempt"), dict) else {}
    number, begun = started.get("number"), started.get("started")
    if not isinstance(number, int) or not isinstance(begun, (int, float)) or number in [
            entry.get("attempt") for entry in ended_attempts(state)]:
        return None
    return {"attempt": number, "nodes": started.get("nodes", ""), **({"tasks": started["tasks"]} if started.get(
        "tasks") else {}), "started": begun, "ended": round(max(begun, last_seen), 3), "exit": None, "goes_on": True}


def close_unended(run_dir: Path) -> None:
    """At an attempt's start, before its prologue: the previous attempt's end recorded when its body could not
    (unended), so that state.json keeps every attempt (issue 46). Never raises."""
    state = read_state(run_dir)
    written = [state.get("time"), _mtime(metrics_path(run_dir))] + [
        _mtime(path) for pattern in ("logs/*", "checkpoints/*") for path in run_dir.glob(pattern)]
    entry = unended(state, max([value for value in written if isinstance(value, (int, float))], default=0.0))
    if entry is not None:
        try:
            write_json_atomically(run_dir / STATE_FILE, {**state, ENDED: [*ended_attempts(state), entry]})
        except OSError:
            pass  # (status then counts the attempts it has)


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def earlier_seconds(state: Mapping[str, Any]) -> float:
    """The time of the attempts before the newest, from their recorded starts and ends (pure): what Slurm's elapsed
    time, its newest attempt's alone, leaves out of a requeued job's."""
    newest = current_attempt(state)
    spans = [(entry.get("started"), entry.get("ended")) for entry in ended_attempts(state)
             if isinstance(entry.get("attempt"), int) and entry["attempt"] < newest]
    return sum(max(0.0, end - begin) for begin, end in spans
               if isinstance(begin, (int, float)) and isinstance(end, (int, float)))


def note_tasks(run_dir: Path, tasks: str) -> None:
    """The newest attempt's tasks beside its prologue's record of it (status's nodes line). Never raises."""
    state = read_state(run_dir)
    if isinstance(state.get("attempt"), dict):
        try:
            write_json_atomically(run_dir / STATE_FILE, {**state, "attempt": {**state["attempt"], "tasks": tasks}})
        except OSError:
            pass


def last_tasks(state: Mapping[str, Any]) -> str:
    """The newest attempt's tasks, as its record says them (a node range's attempts differ); "" when none says."""
    started = state.get("attempt") if isinstance(state.get("attempt"), dict) else {}
    ended = ended_attempts(state)
    newest = ended[-1] if ended and ended[-1].get("attempt", 0) >= started.get("number", 0) else started
    return str(newest.get("tasks") or started.get("tasks") or "")


def how_it_ended(state: Mapping[str, Any]) -> tuple[str, str] | None:
    """The job's end as state.json tells it, in Slurm's words (COMPLETED, FAILED, REQUEUED) with its exit code;
    None where it tells none (a body killed outright, a folder from before the body recorded ends); CANCELLED for
    one Slurm's SIGTERM ended (pure)."""
    last = (recorded(state) or [{}])[-1]
    ended = ended_attempts(state)
    if ended and ended[-1].get("attempt", 0) >= current_attempt(state):
        code = ended[-1].get("exit")
        if ended[-1].get("goes_on"):
            return "REQUEUED", str(code)
        if ended[-1].get("signal"):  # ended by Slurm's SIGTERM: cancelled (or its time limit), as sacct says 0:15
            return "CANCELLED", f"0:{ended[-1]['signal']}"
        return ("COMPLETED" if code == 0 else "FAILED"), str(code)
    if state.get("state") in ("finished", "pruned"):
        return "COMPLETED", "0"
    if last.get("action") == "failed":
        return "FAILED", ""
    return None


def current_attempt(state: Mapping[str, Any]) -> int:
    """The newest attempt's number: the prologue's, else the newest end recorded; 0 when neither says."""
    started = state.get("attempt")
    number = started.get("number") if isinstance(started, dict) else None
    ended = [entry.get("attempt") for entry in ended_attempts(state)]
    return max([value for value in [number, *ended] if isinstance(value, int)], default=0)


def seconds_run(state: Mapping[str, Any]) -> float | None:
    """The attempts' time, from their recorded starts and ends; an attempt whose end the body did not record but
    whose trainer finished counts until then. None when state.json records no time."""
    spans = [(entry.get("started"), entry.get("ended")) for entry in ended_attempts(state)]
    started = state.get("attempt") if isinstance(state.get("attempt"), dict) else {}
    numbers = [entry.get("attempt") for entry in ended_attempts(state)]
    if state.get("state") in ("finished", "pruned") and started.get("number") not in numbers:
        spans.append((started.get("started"), state.get("time")))
    times = [(begin, end) for begin, end in spans if isinstance(begin, (int, float)) and isinstance(end, (int, float))]
    return sum(max(0.0, end - begin) for begin, end in times) if times else None


def last_nodes(state: Mapping[str, Any]) -> str:
    """The newest attempt's nodes: the prologue's record of it, else its recorded end's; "" when neither says."""
    started = state.get("attempt") if isinstance(state.get("attempt"), dict) else {}
    ended = ended_attempts(state)
    newest = ended[-1] if ended and ended[-1].get("attempt", 0) >= started.get("number", 0) else started
    return str(newest.get("nodes") or started.get("nodes") or "")




def note_size(state: Mapping[str, Any], number: int, size: int, node_range: str) -> dict[str, Any]:
    """state.json's fields with attempt `number`'s size added (pure)."""
    kept = [entry for entry in state.get(SIZES, []) if isinstance(entry, dict) and entry.get("attempt") != number]
    return {SIZES: [*kept, {"attempt": number, "size": size, "range": node_range}]}


def attempt_sizes(state: Mapping[str, Any]) -> list[tuple[int, str]]:
    """(attempt, `on 3 of 2-4 nodes`) for each attempt of a node range, oldest first (pure)."""
    found = state.get(SIZES, [])
    entries = [entry for entry in found if isinstance(entry, dict)] if isinstance(found, list) else []
    return [(int(entry["attempt"]), f"on {entry['size']} of {entry['range']} nodes") for entry in entries
            if {"attempt", "size", "range"} <= set(entry)]
