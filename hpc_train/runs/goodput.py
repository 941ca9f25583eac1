"""The run folder's goodput ledger: what each attempt measured (`.ledger/`), and `ledger.json` made from it.

Two writers measure an attempt, each into a file of its own, so neither loses the other's write:

- the job body (`.ledger/body-N.json`): when attempt N started, the nodes and GPUs it held, when its ranks ended;
- the ranks (`.ledger/ranks-N.json`): the chief's measures (ledger.Measured: first steps, the step categories so
  far, and the same at the last checkpoint), written by the trainer's Goodput callback, or by the job body for a
  user's command (its first beat, then compute), unless the command's own callback wrote it.

`ledger.json` is made from these, state.json's attempts (their ends; which ones failed) and job.json (when it was
submitted), and rewritten at each epoch's end and each attempt's end; `status` makes it afresh for a running job.
HPC_TRAIN_LEDGER=0 in the job's environment turns the measuring off. Reading never raises.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hpc_train.runs import attempts, ledger
from hpc_train.runs.folders import RECORD, JobRecord, element_folders
from hpc_train.runs.packed import read_pack_state
from hpc_train.runs.state import read_json_object, read_state, write_json_atomically

LEDGER_FILE = "ledger.json"
MEASURES = ".ledger"
SETTING = "HPC_TRAIN_LEDGER"
# A failure's entries in state.json's attempts: the attempt they name threw its steps since the last checkpoint away.
FAILED_ACTIONS = ("retried", "failed", "requeued by Slurm")


def ledger_on(env: Mapping[str, str]) -> bool:
    """Whether the job measures its ledger: on unless HPC_TRAIN_LEDGER is 0, off, no or false (pure)."""
    return env.get(SETTING, "1").strip().lower() not in ("0", "off", "no", "false")


# A packed trial's attempt (its pack runner's count, not the job's restarts), for its ranks.
ATTEMPT_VARIABLE = "HPC_TRAIN_ATTEMPT"


def attempt_number(env: Mapping[str, str]) -> int:
    """This attempt's number (1 for the first): a packed trial's, else from Slurm's restart count (pure)."""
    own = env.get(ATTEMPT_VARIABLE, "")
    if own.isdigit() and int(own) > 0:
        return int(own)
    count = env.get("SLURM_RESTART_COUNT", "0")
    return int(count) + 1 if count.isdigit() else 1


def body_path(run_dir: Path, number: int) -> Path:
    return Path(run_dir) / MEASURES / f"body-{number}.json"


def ranks_path(run_dir: Path, number: int) -> Path:
    return Path(run_dir) / MEASURES / f"ranks-{number}.json"


def note_body(run_dir: Path, number: int, **fields: Any) -> None:
    """Add `fields` to the body's record of attempt `number` (never raises: a job must not fail on its ledger)."""
    path = body_path(run_dir, number)
    try:
        write_json_atomically(path, {**read_json_object(path), **fields})
    except OSError:
        pass


def note_ranks(run_dir: Path, number: int, measured: Mapping[str, Any]) -> None:
    """The ranks' measures of attempt `number` (ledger.Measured's record); never raises."""
    try:
        write_json_atomically(ranks_path(run_dir, number), dict(measured))
    except OSError:
        pass


def add_to_measures(run_dir: Path, env: Mapping[str, str], **seconds: float) -> None:
    """Seconds added to this attempt's step categories after training (the final model's save, its final
    evaluation; `after` counts them, out of the idle time after training); nothing with the ledger off or never
    measured. Never raises."""
    number = attempt_number(env)
    record = read_json_object(ranks_path(run_dir, number))
    if not ledger_on(env) or not record:
        return
    totals = record.get("totals") if isinstance(record.get("totals"), dict) else {}
    added = {name: round(float(totals.get(name) or 0.0) + value, 4) for name, value in seconds.items()}
    after = float(record.get("after") or 0.0) + sum(seconds.values())
    note_ranks(run_dir, number, {**record, "totals": {**totals, **added}, "after": round(after, 4)})


def has_ranks_measures(run_dir: Path, number: int) -> bool:
    return ranks_path(run_dir, number).exists()


def attempts_of(run_dir: Path, now: float) -> list[ledger.Attempt]:
    """Every attempt the run folder knows of, oldest first: those whose end the body recorded, and the one
    running (until `now`)."""
    run_dir = Path(run_dir)
    state = read_state(run_dir)
    failed = {entry.get("attempt") for entry in attempts.recorded(state) if entry.get("action") in FAILED_ACTIONS}
    ends = {entry.get("attempt"): entry for entry in attempts.ended_attempts(state)}
    numbers = {*[number for number in ends if isinstance(number, int)], *_measured_numbers(run_dir)}
    found = []
    for number in sorted(numbers):
        body = read_json_object(body_path(run_dir, number))
        end = ends.get(number, {})
        started = _time(end.get("started"), body.get("started"))
        if started is None:
            continue
        ranks = ledger.Measured.of(read_json_object(ranks_path(run_dir, number)))
        ended = _time(end.get("ended"))
        running = ended is None and number == max(numbers) and _time(body.get("ended")) is None
        # An attempt with no end recorded that is not the newest ended unseen (its body killed): its last word.
        ended = ended if ended is not None else now if running else _time(body.get("ended"), body.get("ranks_ended"),
                                                                           ranks.last, started)
        was_failed = number in failed or (end.get("exit", 0) != 0 and not end.get("goes_on"))
        found.append(ledger.Attempt(number, started, ended, int(body.get("nodes") or 1), int(body.get("gpus") or 0),
                                    was_failed, _time(body.get("ranks_ended")), ranks, running))
    return found


def make_ledger(run_dir: Path, now: float | None = None) -> dict[str, Any]:
    """The ledger as the run folder tells it now (ledger.ledger's dict)."""
    submitted = read_json_object(Path(run_dir) / RECORD).get("submitted")
    return ledger.ledger(attempts_of(run_dir, time.time() if now is None else now),
                         float(submitted) if isinstance(submitted, (int, float)) else None)


def write_ledger(run_dir: Path) -> dict[str, Any] | None:
    """ledger.json made afresh, when any attempt was measured; never raises."""
    try:
        made = make_ledger(run_dir)
        if made["attempts"]:
            write_json_atomically(Path(run_dir) / LEDGER_FILE, made)
            return made
    except (OSError, ValueError, TypeError):
        pass
    return None


def read_ledger(run_dir: Path) -> dict[str, Any]:
    return read_json_object(Path(run_dir) / LEDGER_FILE)


def status_lines(folders: Sequence[Path], pack: Mapping[str, Any] | None = None, now: float | None = None) -> list[str]:
    """`status`'s line, `goodput 71%: input 18%, ...`, from the ledgers made now: a sweep's or a pack's elements
    summed, each attempt weighted by its nodes (node-seconds), and a pack's slots with no trial as idle (`pack`: its
    pack state, runs/packed.py); none before any attempt was measured."""
    now = time.time() if now is None else now
    totals = dict.fromkeys(ledger.CATEGORIES, 0.0)
    for folder in folders:
        try:
            made = make_ledger(Path(folder), now)
        except (OSError, ValueError, TypeError):
            continue
        for row in made["attempts"]:
            for name in ledger.CATEGORIES:
                totals[name] += row[name] * max(1, int(row.get("nodes") or 1))
    totals["idle"] += pack_idle(pack, now) if pack else 0.0
    line = ledger.status_line(totals)
    return [f"  {line}"] if line else []


def record_lines(record: JobRecord) -> list[str]:
    """`status`'s ledger line for a job, a sweep or a packed sweep (its record)."""
    if not record.is_sweep:
        return status_lines([Path(record.folder)])
    return status_lines(element_folders(record), read_pack_state(Path(record.folder)) if record.pack else None)


def pack_idle(state: Mapping[str, Any], now: float) -> float:
    """A packed sweep's node-seconds with no trial, from its first trial's start to its last end (or now); a share
    on a node the pack gave back to Slurm is held only until it went (runs/packed.py's released)."""
    from hpc_train.runs.packed import released_at

    gone = released_at(dict(state))
    slots = {int(slot["index"]): list(slot.get("nodes") or []) for slot in state.get("slots") or []
             if isinstance(slot, dict) and "index" in slot}
    runs: dict[int, list[tuple[float, float]]] = {index: [] for index in slots}
    for entry in state.get("trials") or []:
        for run in (entry.get("runs") or []) if isinstance(entry, dict) else []:
            if isinstance(run.get("started"), (int, float)) and run.get("slot") in runs:
                runs[run["slot"]].append((float(run["started"]), float(run.get("ended") or now)))
    spans = [span for held in runs.values() for span in held]
    if not spans:
        return 0.0
    begin, end = min(start for start, _ in spans), max(finish for _, finish in spans)
    return sum(ledger.idle_slots([(len(slots[index]) or 1, held)], begin,
                                 min([end, *(gone[node] for node in slots[index] if node in gone)]))
               for index, held in runs.items())


def _measured_numbers(run_dir: Path) -> list[int]:
    numbers = []
    for path in (run_dir / MEASURES).glob("body-*.json"):
        number = path.stem.removeprefix("body-")
        if number.isdigit():
            numbers.append(int(number))
    return numbers


def _time(*values: Any) -> float | None:
    for value in values:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None
