"""What a job's batch script does before its step: say how this attempt came about, record a restart nobody
explained, and stop once the retries are spent.

Run by hpc-train's job body (hpc_train/injob/body.py) in its own process,
before the step, as `before_the_step`; scripts written before the body call it
as `hpc-train prologue RUN_DIR [--max-retries N]`. Its 3 (EXIT_RETRIES_SPENT)
ends the job before its step (exit 1), its 4 (EXIT_MOVED) ends this attempt
quietly (exit 0: the job requeued itself); any failure of its own changes
nothing, as for the epilogue.
Slurm restarts a job by itself when a node under it is lost (NODE_FAIL, with
--requeue), and the batch script of that attempt may have died with the
node: SLURM_RESTART_COUNT then runs ahead of the recorded history, and the
nodes of the last attempt that are down now are the cause.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpc_train.config import DEFAULT_MAX_RETRIES
from hpc_train.exitcodes import EXIT_RETRIES_SPENT
from hpc_train.injob import shrink
from hpc_train.injob.epilogue import QuietParser, log_tail, newest_checkpoint
from hpc_train.injob.retry import expand_nodes, requeue_excluding, usable_and_lost
from hpc_train.runs import attempts
from hpc_train.runs.requeue import restart_count
from hpc_train.runs.secret import PRIVATE_FOLDER
from hpc_train.runs.state import STATE_FILE, read_state, write_json_atomically
from hpc_train.slurm.client import SlurmClient
from hpc_train.slurm.noderange import attempt_nodes, nodes_needed
from hpc_train.spec.noderange import size_words
from hpc_train.version import PREFIX

# The prologue's "requeued itself": Slurm restarted the job on the node that failed; the script ends quietly.
EXIT_MOVED = 4
# Entries of the history that each stand for one restart of the job.
RESTARTS = ("retried", "requeued", "requeued by Slurm", "restarted")


# srun's line when a node of the step is lost.
_NODE_FAILURE = re.compile(r"Node failure on (\S+)")


def unexplained_restarts(restart_count: int, history: list[dict[str, Any]]) -> int:
    """Restarts of the job that no entry of its history accounts for (pure)."""
    return max(0, restart_count - sum(int(attempt.get("restarts", 1)) for attempt in history
                                      if attempt.get("action") in RESTARTS))


def previous_attempt_log(text: str, job_id: str) -> str:
    """The part of a job log (every attempt appended) between the last two attempts' start lines (pure)."""
    starts = [match.start() for match in re.finditer(rf"^{PREFIX}: job {re.escape(job_id)}\b", text, re.M)]
    return text[starts[-2]:starts[-1]] if len(starts) >= 2 else ""


def failed_nodes(log: str, last_nodes: list[str], lost: set[str]) -> list[str]:
    """The nodes of the last attempt that failed: srun said so, or Slurm says they are down now (pure)."""
    return sorted(set(_NODE_FAILURE.findall(log)) | (set(last_nodes) & lost))


def slurms_restart(down: list[str], when: float) -> dict[str, Any]:
    """The history's entry for a restart Slurm made by itself: a node of the last attempt lost, or not (pure)."""
    if down:
        return {"time": round(when, 3), "kind": "node_down", "cause": f"{', '.join(down)} down",
                "after": f"{', '.join(down)} went down", "action": "requeued by Slurm", "excluded": []}
    return {"time": round(when, 3), "kind": "restarted", "cause": "Slurm restarted the job (a requeue by hand, "
            "a preemption or a node that came back)", "after": "a restart by Slurm", "action": "restarted",
            "excluded": []}


def _move_off(job_id: str, job: dict[str, str], down: list[str], usable: set[str], needed: int,
              env: Mapping[str, str]) -> str | None:
    """Requeue the job without the failed nodes, if it still fits elsewhere; what it excludes, or None."""
    exclude = tuple(sorted({*expand_nodes(job.get("ExcNodeList", "")), *down}))
    if len(usable - set(exclude)) < needed:
        return None
    problem = requeue_excluding(job_id, exclude, SlurmClient.local(env))
    if problem is not None:
        _say(f"warning: could not move the job off {', '.join(down)}: {problem}")
        return None if problem.startswith("scontrol requeue") else ""  # requeued, but nothing excluded
    return ",".join(exclude)


def main(argv: list[str] | None = None) -> int:
    parser = QuietParser(prog="hpc-train prologue", add_help=False)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--max-retries", type=int, default=None)
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    except ValueError:
        print("usage: hpc-train prologue RUN_DIR [--max-retries N]", file=sys.stderr)
        return 2
    return before_the_step(args.run_dir, os.environ, args.max_retries)


def before_the_step(run_dir: Path, env: Mapping[str, str], max_retries: int | None) -> int:
    run_dir.mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER)
    attempts.clear_notes(run_dir)  # the last attempt's, already read by its epilogue (or left by a lost node)
    (run_dir / attempts.PROGRESS_FILE).unlink(missing_ok=True)
    state = read_state(run_dir)
    if max_retries is None:
        max_retries = int(state.get("max_retries", DEFAULT_MAX_RETRIES))
    restarts = restart_count(env)
    history = attempts.history(run_dir)
    if unexplained_restarts(restarts, history) and env.get("SLURM_JOB_ID"):
        last_nodes = expand_nodes(state.get("attempt", {}).get("nodes", "")) if isinstance(
            state.get("attempt"), dict) else []
        slurm = SlurmClient.local(env)
        job = slurm.show_job(env["SLURM_JOB_ID"])
        usable, lost = usable_and_lost(slurm.node_states(job.get("Partition") or None))
        down = failed_nodes(previous_attempt_log(log_tail(job), env["SLURM_JOB_ID"]), last_nodes, lost)
        entry = slurms_restart(down, time.time())
        entry["attempt"] = restarts
        step, saved = newest_checkpoint(run_dir / "checkpoints")
        if step is not None:
            entry["checkpoint_step"], entry["checkpoint_time"] = step, saved
        here = set(expand_nodes(env.get("SLURM_JOB_NODELIST", "")))
        spent = entry["action"] == "requeued by Slurm" and attempts.retries_used([*history, entry]) > max_retries
        if set(down) & here and max_retries > 0 and not spent:  # Slurm put the job back on the failed node: move
            moved = _move_off(env["SLURM_JOB_ID"], job, down, usable, nodes_needed(env, len(here)), env)
            if moved is not None:
                attempts.record(run_dir, {**entry, "excluded": down if moved else [], "restarts": 2})
                _say(f"{', '.join(sorted(set(down) & here))} failed in attempt {restarts} and Slurm started "
                     f"attempt {restarts + 1} there again: requeued without it")
                return EXIT_MOVED
        attempts.record(run_dir, entry)
        history = [*history, entry]
    total = attempts.attempts_allowed(history, max_retries)
    # (A retry inside the allocation was said by the epilogue a moment ago, in this process: shrink.py.)
    if history and history[-1].get("action") in RESTARTS and history[-1].get("action") != "requeued" \
            and not history[-1].get(shrink.IN_ALLOCATION):
        last = history[-1]
        _say(attempts.describe(last, restarts, total))
        if last.get("action") == "requeued by Slurm" and attempts.retries_used(history) > max_retries:
            _say(f"retries exhausted ({max_retries} of {max_retries}): the job ends here; resubmit it to resume")
            return EXIT_RETRIES_SPENT
    state = read_state(run_dir)
    # The last attempt's "stopped" or "requeued" is over: this attempt starts (a finished run stays finished).
    fresh = {"state": "starting"} if state.get("state") in ("stopped", "requeued", "running") else {}
    sized = attempt_nodes(env)
    write_json_atomically(run_dir / STATE_FILE, {**state, **fresh, "attempt": {
        "number": restarts + 1, "nodes": env.get("SLURM_JOB_NODELIST", ""), "started": round(time.time(), 3)},
        **(attempts.note_size(state, restarts + 1, sized[0], str(sized[1])) if sized else {})})
    if sized:
        _say(f"attempt {restarts + 1} {size_words(*sized)}: "
             f"{_why_this_size(sized[0], sized[1].most, env, released_here(history))}")
    return 0


def size_reason(size: int, most: int, excluded: list[str], unusable: list[str], others: int) -> str:
    """Why an attempt of a node range runs on `size` nodes (pure): `excluded` (the job's excluded nodes: a retry's),
    `unusable` (the partition's down or drained nodes), `others` (the partition's nodes left beside those)."""
    if size >= most:
        return f"all {most} it may use were free"
    why = [f"{', '.join(excluded)} excluded"] if excluded else []
    why += [f"{', '.join(unusable)} down or drained"] if unusable else []
    why.append("the partition's other nodes were busy with other jobs" if others > size else
               "no other node of the partition can take it")
    return "; ".join(why) + " (Slurm gave what was free, never below MIN)"


def released_here(history: list[dict[str, Any]]) -> set[str]:
    """The nodes a retry gave back to Slurm inside an allocation (shrink.py): excluded as Slurm's ExcNodeList's are,
    which a running job cannot change (pure)."""
    return {node for entry in history for node in entry.get("released") or ()}


def _why_this_size(size: int, most: int, env: Mapping[str, str], released: set[str]) -> str:
    slurm = SlurmClient.local(env)
    job = slurm.show_job(env["SLURM_JOB_ID"])
    states = slurm.node_states(job.get("Partition") or None)
    usable, _ = usable_and_lost(states)
    excluded = sorted((set(expand_nodes(job.get("ExcNodeList", ""))) | released) & set(states))
    unusable = sorted(set(states) - usable - set(excluded))
    return size_reason(size, most, excluded, unusable, len(usable - set(excluded)))


def _say(message: str) -> None:
    print(f"{PREFIX}: {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
