"""The hang watchdog: a thread of the job body that ends an attempt on which no rank makes progress.

A hang that every rank shares (a file server that stopped answering, a
deadlocked data loader, a collective that never completes on every rank) sends
no signal and kills no task: without this, it runs until the time limit. The
watchdog looks at what progress leaves behind in the run folder: the chief's
progress beat (`.progress.json`, the trainer's and a task module's), and for a
user's command its ranks' logs growing (`logs/rank-N.out`...) or the heartbeat
it may touch (`$HPC_TRAIN_RUN_DIR/.heartbeat`, docs/command.md). Any change of
any of them is a beat. When no beat came for the threshold, it asks every rank
for its stacks (runs/stacks.py), leaves the failure note "hung" (failures.py
reads it) and ends the step; the epilogue retries as for a frozen rank.

The decision is pure (`threshold_seconds`, `is_hung`): an explicit
hang_minutes wins (down to 1 minute; 0 turns the watchdog off); otherwise the
run's own pace sets it, 20 times the longest gap between beats seen, never
under 10 minutes, so a slow but moving run is never taken for a hang. Before
the first beat the start-up allowance is added: the trainer's rendezvous'
startup_timeout (its `--set startup_timeout=S` or --config file's, else 300 s;
a command's: 300 s), which also covers TensorFlow's import, the data, the
first compile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from hpc_train.runs import attempts, stacks

FLOOR_SECONDS = 600.0
GAPS = 20.0
# The trainer's default startup_timeout: the rendezvous may take this long before the first step.
STARTUP_SECONDS = 300.0
HEARTBEAT_FILE = ".heartbeat"
# How long the ranks get to write their stacks before the step is ended (they look every second).
STACKS_WAIT_SECONDS = 10.0
# How often the watchdog looks at the run folder: a hang is seen within this of its threshold.
POLL_SECONDS = 5.0


@dataclass(frozen=True)
class Beats:
    """What the watchdog has seen of the run's progress (monotonic seconds)."""

    started: float
    last: float | None = None  # the last beat, None before the first
    longest_gap: float = 0.0  # the longest gap between two beats, the start to the first one counted

    def beat(self, now: float) -> "Beats":
        gap = now - (self.last if self.last is not None else self.started)
        return Beats(self.started, now, max(self.longest_gap, gap))


def number(text: str | None) -> float | None:
    """A setting's text as a number; None when there is none or it is not one (the trainer refuses it) (pure)."""
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def trainers_startup(command: Sequence[str], said: str | None) -> float:
    """The start-up allowance of a trainer's step: the rendezvous' startup_timeout, as the trainer reads it: its
    `--set startup_timeout=S` (`said`), else its --config file's, else its default."""
    seconds = number(said if said is not None else config_setting(command, "startup_timeout"))
    return seconds if seconds is not None and seconds > 0 else STARTUP_SECONDS


def config_setting(command: Sequence[str], key: str) -> str | None:
    """KEY's value in the trainer's --config YAML file, as text; None without the file or the key."""
    files = [word.removeprefix("--config=") for before, word in zip(["", *command], command)
             if word.startswith("--config=") or before == "--config"]
    try:
        values = yaml.safe_load(Path(files[-1]).read_text()) if files else None
    except (OSError, yaml.YAMLError):
        return None  # the trainer says what is wrong with it
    return str(values[key]) if isinstance(values, dict) and values.get(key) is not None else None


def threshold_seconds(hang_minutes: float | None, beats: Beats, startup: float | None = None) -> float | None:
    """How long without a beat is a hang; None: never (hang_minutes 0). `startup`: the allowance before the
    first beat, None for the default (pure)."""
    if hang_minutes is not None and hang_minutes <= 0:
        return None
    if hang_minutes is not None:  # (TrainConfig holds it to 1 minute or more)
        threshold = hang_minutes * 60.0
    else:
        threshold = max(FLOOR_SECONDS, GAPS * beats.longest_gap)
    return threshold if beats.last is not None else threshold + (STARTUP_SECONDS if startup is None else startup)


def is_hung(hang_minutes: float | None, beats: Beats, now: float, startup: float | None = None) -> bool:
    """No beat for the threshold (pure)."""
    threshold = threshold_seconds(hang_minutes, beats, startup)
    since = beats.last if beats.last is not None else beats.started
    return threshold is not None and now - since >= threshold


def hang_cause(seconds: float) -> str:
    """The failure's words (pure)."""
    span = f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"
    return f"hung: no progress on any rank for {span}"


def watched_files(run_dir: Path, command: bool) -> list[Path]:
    """What progress shows in: the heartbeat always; the chief's beat, or a command's rank logs."""
    files = [run_dir / HEARTBEAT_FILE]
    if not command:
        return [*files, run_dir / attempts.PROGRESS_FILE]
    return [*files, *sorted((run_dir / "logs").glob("rank-*")), *sorted(run_dir.glob("*.out")),
            *sorted(run_dir.glob("*.err"))]


def signature(files: Iterable[Path]) -> tuple[tuple[str, int, int], ...]:
    """Each file's size and modification time: any change is a beat."""
    seen = []
    for path in files:
        try:
            stat = path.stat()
        except OSError:
            continue
        seen.append((str(path), stat.st_size, stat.st_mtime_ns))
    return tuple(seen)


@dataclass(frozen=True)
class Watch:
    run_dir: Path
    hang_minutes: float | None
    command: bool
    attempt: int  # the attempt's number, as the stacks files name it (1 for the first)
    startup: float | None = None  # the allowance before the first beat (trainers_startup); None: the default


class Watchdog:
    """The thread: start() beside the step, stop() once it ended; `end` ends the step (the body's)."""

    def __init__(self, watch: Watch, end: Callable[[], None], clock: Callable[[], float] = time.monotonic,
                 say: Callable[[str], None] = print) -> None:
        self.watch, self._end, self._clock, self._say = watch, end, clock, say
        self._stopped = threading.Event()
        self.fired = False

    def start(self) -> "Watchdog":
        """Start watching, unless hang_minutes 0 turned the watchdog off."""
        if self.watch.hang_minutes is not None and self.watch.hang_minutes <= 0:
            return self
        stacks.clear_request(self.watch.run_dir)
        threading.Thread(target=self._run, name="hpc-train watchdog", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopped.set()

    def _run(self) -> None:
        beats = Beats(self._clock())
        seen = signature(watched_files(self.watch.run_dir, self.watch.command))
        while not self._stopped.wait(POLL_SECONDS):
            now_seen = signature(watched_files(self.watch.run_dir, self.watch.command))
            if now_seen != seen:
                seen, beats = now_seen, beats.beat(self._clock())
            if is_hung(self.watch.hang_minutes, beats, self._clock(), self.watch.startup):
                return self._act(self._clock() - (beats.last if beats.last is not None else beats.started))

    def _act(self, seconds: float) -> None:
        """Stacks from every rank, the note, then the step ended."""
        self.fired = True
        cause = hang_cause(seconds)
        self._say(f"hpc-train: {cause}: recording every rank's stacks, then ending the step")
        stacks.request_stacks(self.watch.run_dir, self.watch.attempt)
        if self._stopped.wait(STACKS_WAIT_SECONDS):
            return  # the step ended meanwhile by itself: its own failure, or success, stands
        attempts.note_hang(self.watch.run_dir, cause, round(seconds, 1))
        self._end()


def trainers_hang_minutes(command: Sequence[str]) -> float | None:
    """The trainer's hang_minutes: its last `--set hang_minutes=M` (the slurm/*.sh scripts' way of saying settings),
    else its --config file's; None when there is none or it is not a number (the trainer refuses it then)."""
    said = trainers_setting(command, "hang_minutes")
    return number(said if said is not None else config_setting(command, "hang_minutes"))


def trainers_setting(command: Sequence[str], key: str) -> str | None:
    """The last `--set KEY=VALUE` given to the trainer, its text; None when there is none (pure)."""
    values = [word.split("=", 2)[-1] if word.startswith("--set=") else word.split("=", 1)[1]
              for before, word in zip(["", *command], command)
              if word.startswith(f"--set={key}=") or (before == "--set" and word.startswith(f"{key}="))]
    return values[-1] if values else None
