"""Every rank's Python stacks, on request, into the run folder: what a hung attempt was doing.

The job body's watchdog (injob/watchdog.py) asks by writing a request file
(`.stacks-request`, the attempt's number in it); a thread in each rank polls
for it and answers with faulthandler's dump of all its threads into
`stacks/attempt-A-rank-R.txt`. A file, not a signal: USR1 and USR2 are the
time-limit warning, and a file reaches every rank on every path (srun, the
mock launcher, a container) without a signal to forward. faulthandler writes
from this thread while the main thread is stuck in TensorFlow's C++, where no
Python signal handler would run. A user's command has no such thread: the
supervisor beside it answers for it with py-spy's dump (injob/pyspy.py), which
`top_frames` reads as well.
"""

from __future__ import annotations

import faulthandler
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO

REQUEST_FILE = ".stacks-request"
STACKS = "stacks"
# How often a rank looks for a request: the watchdog waits a few of these for the answers.
POLL_SECONDS = 1.0


def stacks_file(run_dir: Path, attempt: int, rank: int) -> Path:
    return run_dir / STACKS / f"attempt-{attempt}-rank-{rank}.txt"


def request_stacks(run_dir: Path, attempt: int) -> None:
    """Ask every rank for its stacks (the watchdog's side)."""
    path = run_dir / REQUEST_FILE
    path.write_text(f"{attempt}\n")


def clear_request(run_dir: Path) -> None:
    (run_dir / REQUEST_FILE).unlink(missing_ok=True)


def requested_attempt(run_dir: Path) -> int | None:
    """The attempt whose stacks are asked for, or None."""
    try:
        text = (run_dir / REQUEST_FILE).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def requested_at(run_dir: Path) -> float | None:
    """When the request was written (its file's modification time), or None without one."""
    try:
        return (run_dir / REQUEST_FILE).stat().st_mtime
    except OSError:
        return None


def own_stacks(out: TextIO) -> None:
    """This process's stacks, all threads: faulthandler's dump."""
    faulthandler.dump_traceback(out, all_threads=True)


def header(rank: int, attempt: int, pid: int) -> str:
    """A stacks file's first line: whose stacks, and when."""
    return f"rank {rank}, attempt {attempt}, pid {pid}, {time.strftime('%Y-%m-%d %H:%M:%S')}\n"


def _aside(run_dir: Path, attempt: int, rank: int) -> tuple[Path, Path]:
    """The rank's file for the attempt, and this process's file beside it, written first then renamed over it:
    a reader never sees half a file, and a command that answers for itself and its supervisor's py-spy never
    mix in one."""
    path = stacks_file(run_dir, attempt, rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path, path.with_name(f"{path.name}.{os.getpid()}.tmp")


def dump_stacks(run_dir: Path, attempt: int, rank: int) -> None:
    """This process's stacks into the rank's file for the attempt."""
    path, aside = _aside(run_dir, attempt, rank)
    with open(aside, "w") as out:
        out.write(header(rank, attempt, os.getpid()))
        out.flush()
        own_stacks(out)
    os.replace(aside, path)


def write_stacks(run_dir: Path, attempt: int, rank: int, text: str) -> None:
    """`text` as the rank's file for the attempt (py-spy's dumps of a command, rewritten as each arrives)."""
    path, aside = _aside(run_dir, attempt, rank)
    aside.write_text(text)
    os.replace(aside, path)


def rank_of(environ: Mapping[str, str]) -> int:
    """This process's rank, SLURM_PROCID (0 outside a step) (pure)."""
    procid = str(environ.get("SLURM_PROCID", "0"))
    return int(procid) if procid.isdigit() else 0


def answer_requests(run_dir: str | os.PathLike[str], environ: Mapping[str, str] | None = None,
                    answer: Callable[[Path, int, int], None] | None = None) -> threading.Thread:
    """Start this rank's thread that answers the watchdog's requests (a daemon: it ends with the process): with
    this process's stacks, or by `answer(run_dir, attempt, rank)` (the supervisor's, for its command)."""
    rank = rank_of(os.environ if environ is None else environ)
    folder = Path(run_dir)
    respond = answer or dump_stacks

    def answering() -> None:
        answered: set[int] = set()
        while True:
            attempt = requested_attempt(folder)
            if attempt is not None and attempt not in answered:
                answered.add(attempt)
                try:
                    respond(folder, attempt, rank)
                except OSError:
                    pass  # a rank that cannot write its stacks still ends as asked
            time.sleep(POLL_SECONDS)

    thread = threading.Thread(target=answering, name="hpc-train stacks", daemon=True)
    thread.start()
    return thread


def read_stacks(run_dir: Path) -> list[tuple[str, str]]:
    """Every stacks file (name, text), oldest attempt first, by rank."""
    def order(path: Path) -> tuple[int, int]:
        parts = path.stem.split("-")
        numbers = [int(part) for part in parts if part.isdigit()]
        return (numbers + [0, 0])[0], (numbers + [0, 0])[1]

    files = sorted((run_dir / STACKS).glob("attempt-*-rank-*.txt"), key=order)
    return [(path.name, path.read_text(errors="replace")) for path in files]


# Frames that are not the run's own code: Python's library, installed packages, hpc-train's machinery.
_NOT_OWN = ("/site-packages/", "/dist-packages/", "/hpc_train/training/", "/hpc_train/runs/", "/hpc_train/injob/")


def _own(frame: str) -> bool:
    return not any(part in frame for part in _NOT_OWN) and "/lib/python3." not in frame


# py-spy's frame line, `    waits_for_data (/home/me/train.py:12)` (no line where it has none).
_SPY_FRAME = re.compile(r"^\s+(?P<function>\S.*?) \((?P<file>.+?)(?::(?P<line>\d+))?\)$")


def frame_line(line: str) -> str | None:
    """A dump's frame line as faulthandler says it (`File "F", line N in FUNCTION`), py-spy's too; None for any
    other line (pure)."""
    if line.strip().startswith("File "):
        return line.strip()
    spied = _SPY_FRAME.match(line)
    if not spied:
        return None
    number = f", line {spied['line']}" if spied["line"] else ""
    return f'File "{spied["file"]}"{number} in {spied["function"]}'


def thread_blocks(text: str) -> tuple[list[list[str]], int]:
    """A dump's threads, their frames innermost first, the dumping thread (faulthandler's "Current thread", this
    module's) left out; and the main thread's index: the one named "MainThread", else py-spy's first (it lists the
    threads oldest first, after its `Python vX.Y` line), faulthandler's last (newest first) (pure)."""
    threads: list[list[str]] = []
    main, current = None, False
    for line in text.splitlines():
        if line.startswith("Current thread "):
            current = True
        elif line.startswith("Thread "):
            current = False
            threads.append([])
            if main is None and line.rstrip().endswith('"MainThread"'):
                main = len(threads) - 1
        elif threads and not current and (frame := frame_line(line)):
            threads[-1].append(frame)
    if main is None:
        main = 0 if re.search(r"^Python v\d", text, re.MULTILINE) else len(threads) - 1
    return threads, main


def top_frames(text: str, count: int = 3) -> list[str]:
    """Where a dump (faulthandler's or py-spy's) says the rank was stuck (pure): the innermost frames from the
    first frame of the run's own code (the task module, the user's script), in the first thread that has one;
    without one, the main thread's innermost."""
    threads, main = thread_blocks(text)
    for frames in threads:
        own = [index for index, frame in enumerate(frames) if _own(frame)]
        if own:
            return frames[own[0]:own[0] + count]
    return threads[main][:count] if threads else []


def newest_chief_top(run_dir: Path, count: int = 3) -> tuple[str, list[str]]:
    """The newest hung attempt's rank 0 stacks: (its file's name, its main thread's innermost frames); ("", [])
    when no attempt hung."""
    chief = [(name, text) for name, text in read_stacks(run_dir) if name.endswith("-rank-0.txt")]
    if not chief:
        return "", []
    name, text = chief[-1]
    return name, top_frames(text, count)
