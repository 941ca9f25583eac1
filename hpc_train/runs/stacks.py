"""Every rank's Python stacks, on request, into the run folder: what a hung attempt was doing.

The job body's watchdog (injob/watchdog.py) asks by writing a request file
(`.stacks-request`, the attempt's number in it); a thread in each rank polls
for it and answers with faulthandler's dump of all its threads into
`stacks/attempt-A-rank-R.txt`. A file, not a signal: USR1 and USR2 are the
time-limit warning, and a file reaches every rank on every path (srun, the
mock launcher, a container) without a signal to forward. faulthandler writes
from this thread while the main thread is stuck in TensorFlow's C++, where no
Python signal handler would run.
"""

from __future__ import annotations

import faulthandler
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path

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


def dump_stacks(run_dir: Path, attempt: int, rank: int) -> None:
    """This process's stacks, all threads, into its file for the attempt."""
    path = stacks_file(run_dir, attempt, rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as out:
        out.write(f"rank {rank}, attempt {attempt}, pid {os.getpid()}, {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        out.flush()
        faulthandler.dump_traceback(out, all_threads=True)


def answer_requests(run_dir: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> threading.Thread:
    """Start this rank's thread that answers the watchdog's requests (a daemon: it ends with the process)."""
    env = os.environ if environ is None else environ
    rank = int(env.get("SLURM_PROCID", "0") or 0) if str(env.get("SLURM_PROCID", "0")).isdigit() else 0
    folder = Path(run_dir)

    def answer() -> None:
        answered: set[int] = set()
        while True:
            attempt = requested_attempt(folder)
            if attempt is not None and attempt not in answered:
                answered.add(attempt)
                try:
                    dump_stacks(folder, attempt, rank)
                except OSError:
                    pass  # a rank that cannot write its stacks still ends as asked
            time.sleep(POLL_SECONDS)

    thread = threading.Thread(target=answer, name="hpc-train stacks", daemon=True)
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


def top_frames(text: str, count: int = 3) -> list[str]:
    """Where a faulthandler dump says the rank was stuck (pure): the innermost frames from the first frame of
    the run's own code (the task module, the user's script), in the first thread that has one; without one,
    the main thread's innermost. The dumping thread ("Current thread", this module's) is left out."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("Thread "):
            blocks.append([])
        elif line.startswith("Current thread "):
            blocks.append(["(current)"])
        elif blocks and line.strip().startswith("File "):
            blocks[-1].append(line.strip())
    threads = [block for block in blocks if block[:1] != ["(current)"]]
    for frames in threads:
        own = [index for index, frame in enumerate(frames) if _own(frame)]
        if own:
            return frames[own[0]:own[0] + count]
    # faulthandler lists the threads newest first: the main thread, started first, is the last.
    return threads[-1][:count] if threads else []


def newest_chief_top(run_dir: Path, count: int = 3) -> tuple[str, list[str]]:
    """The newest hung attempt's rank 0 stacks: (its file's name, its main thread's innermost frames); ("", [])
    when no attempt hung."""
    chief = [(name, text) for name, text in read_stacks(run_dir) if name.endswith("-rank-0.txt")]
    if not chief:
        return "", []
    name, text = chief[-1]
    return name, top_frames(text, count)
