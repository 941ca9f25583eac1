"""The job body's part of the goodput ledger (runs/goodput.py): an attempt's start, what it holds, when its ranks
ended, ledger.json at its end; for a user's command, also what its ranks measured: start-up until its first beat,
then compute (unless the command's own Goodput callback measured more).

A command's first beat is the first touch of `$HPC_TRAIN_RUN_DIR/.heartbeat` (or the trainer's progress beat);
one that never beats counts from its first line in its logs; one that writes nothing, from the step's start.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hpc_train.injob.watchdog import HEARTBEAT_FILE, signature, watched_files
from hpc_train.runs import attempts, goodput

POLL_SECONDS = 0.2  # until the first beat only: a few stat calls


def gpus_held(env: Mapping[str, str], nodes: int, gpus_per_node: int) -> int:
    """The GPUs the attempt holds: Slurm's per node (SLURM_GPUS_PER_NODE, `2` or `a100:2`; SLURM_GPUS_ON_NODE)
    times its nodes, else the mock launcher's; a heterogeneous job's, each component's summed (pure)."""
    components = components_of(env)
    if components:
        return sum(gpus_held({key: env.get(f"{key}_HET_GROUP_{index}", "") for key in GPU_VARIABLES}, count, 0)
                   for index, count in enumerate(components))
    for name in GPU_VARIABLES:
        found = re.search(r"(\d+)$", env.get(name, "").split(",")[0])
        if found:
            return int(found.group(1)) * nodes
    return gpus_per_node * nodes


GPU_VARIABLES = ("SLURM_GPUS_PER_NODE", "SLURM_GPUS_ON_NODE")


def components_of(env: Mapping[str, str]) -> list[int]:
    """A heterogeneous job's nodes per component (SLURM_JOB_NUM_NODES_HET_GROUP_N); [] for a job of one (pure)."""
    size = env.get("SLURM_HET_SIZE", "")
    if not size.isdigit() or int(size) < 2:
        return []
    counts = [env.get(f"SLURM_JOB_NUM_NODES_HET_GROUP_{index}", "") for index in range(int(size))]
    return [int(count) for count in counts] if all(count.isdigit() for count in counts) else []


class FirstBeat:
    """A thread noting when a command's ranks first showed progress (its heartbeat, else its logs)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.beat: float | None = None
        self.logged: float | None = None
        self._stop = threading.Event()
        self._beats = [run_dir / HEARTBEAT_FILE, run_dir / attempts.PROGRESS_FILE]
        self._seen = signature(self._beats)
        self._logs = signature(watched_files(run_dir, True))

    def start(self) -> "FirstBeat":
        threading.Thread(target=self._run, name="hpc-train first beat", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while self.beat is None and not self._stop.wait(POLL_SECONDS):
            if signature(self._beats) != self._seen:
                self.beat = changed_at(self._beats)
            elif self.logged is None and signature(watched_files(self.run_dir, True)) != self._logs:
                self.logged = changed_at(watched_files(self.run_dir, True))


def changed_at(files: list[Path]) -> float:
    """When the first of `files` that changed since the step began changed: the newest modification time seen
    at the first poll that saw one (a beat is rarely twice in a poll), else now."""
    times = []
    for path in files:
        try:
            times.append(path.stat().st_mtime)
        except OSError:
            continue
    return max(times, default=time.time())


@contextmanager
def ledgered_step(run_dir: Path, env: Mapping[str, str], number: int, nodes: int, gpus_per_node: int,
                  command: bool, started: float | None = None) -> Iterator[None]:
    """Around the step: the attempt's start (`started`: the body's, before its prologue; else now) and holdings
    before, when its ranks ended after (and a command's measures). Nothing when HPC_TRAIN_LEDGER turns it off."""
    if not goodput.ledger_on(env):
        yield
        return
    started = time.time() if started is None else started
    goodput.note_body(run_dir, number, started=round(started, 3), nodes=nodes,
                      gpus=gpus_held(env, nodes, gpus_per_node))
    beat = FirstBeat(run_dir).start() if command else None
    step_began = time.time()
    previous = signal.getsignal(signal.SIGTERM)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda signum, frame: _ended_by(signum, run_dir, number, previous))
    try:
        yield
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)  # (None: C set it)
        ended = time.time()
        goodput.note_body(run_dir, number, ranks_ended=round(ended, 3))
        if beat is not None:
            beat.stop()
            if not goodput.has_ranks_measures(run_dir, number):  # its own callback's measures stand
                goodput.note_ranks(run_dir, number, command_measures(step_began, ended, beat.beat or beat.logged))


def _ended_by(signum: int, run_dir: Path, number: int, previous: Any) -> None:
    """Slurm ends the attempt (a requeue, a cancel): its end noted in the ledger, then the signal does what it did
    before (the body's own handler records the attempt's end in state.json: onterm.ending_on_term)."""
    if previous == signal.SIG_IGN:
        return  # the body ignores it (its epilogue): the attempt goes on, and has not ended
    now = round(time.time(), 3)
    goodput.note_body(run_dir, number, ranks_ended=now, ended=now)
    if callable(previous):
        previous(signum, None)
        return
    signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def command_measures(started: float, ended: float, first: float | None) -> dict[str, Any]:
    """A user's command's measures: start-up until its first beat, the rest compute (pure)."""
    first = min(max(first if first is not None else started, started), ended)
    return {"first_steps": round(first, 3), "totals": {"compute": round(ended - first, 3)}, "last": round(ended, 3)}


def after_the_attempt(run_dir: Path, env: Mapping[str, str]) -> None:
    """ledger.json, once the attempt's end is in state.json."""
    if goodput.ledger_on(env):
        goodput.write_ledger(run_dir)


def ledgered_trial(folder: Path, start: Any, share: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, str]:
    """A packed trial's attempt starting (`start`: the pack's Start): its start and share into its folder's ledger;
    the variable telling its ranks which attempt they are (their measures' file)."""
    if not goodput.ledger_on(env):
        return {}
    nodes = len(start.slot.nodes)
    goodput.note_body(folder, start.attempt, started=round(time.time(), 3), nodes=nodes,
                      gpus=int(share.get("gpus") or 0) * nodes)
    return {goodput.ATTEMPT_VARIABLE: str(start.attempt)}


def trial_ended(folder: Path, attempt: int, env: Mapping[str, str]) -> None:
    """A packed trial's step ended: when its ranks did."""
    if goodput.ledger_on(env):
        goodput.note_body(folder, attempt, ranks_ended=round(time.time(), 3))
