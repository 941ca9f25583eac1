"""TensorFlow's start-up noise kept out of the rank logs and a run's output, unless asked for.

On a node without a CUDA driver (every CPU node, and the local cluster's fake
GPUs), TensorFlow's C++ start-up prints a dozen lines per task that say nothing
a user can act on ("failed call to cuInit", "Could not find cuda drivers", the
oneDNN and CPU-instruction notices), and a multi-worker cluster's start a dozen
more (its servers, the coordination service meeting every task). TF_CPP_MIN_LOG_LEVEL
cannot hide them all: some are printed before TensorFlow reads it. So a run's stderr (a
Slurm task's, one the mock launcher started, a plain `hpc-train train`) goes
through a small filter process that drops exactly those known lines and passes
every other byte on. The filter is its own process, so nothing is lost when the
task dies (it drains the pipe, then exits), and it ignores the signals Slurm
sends a step, so it outlives the task it serves. Where Slurm kills what is
left of a step as soon as its task exits (proctrack/cgroup, as on most sites),
the task waits for the filter first (`drain`, at exit and before os._exit). If
the filter itself dies, the task's stderr goes straight to the log again
(unfiltered, never lost), and says so once.

HPC_TRAIN_TF_STARTUP_LOGS=1 keeps every line; the task's own one-line summary
of its GPUs is printed either way (trainer.py).
"""

from __future__ import annotations

import os
import re
import atexit
import signal
import sys
import threading
from collections.abc import Mapping, Sequence

SHOW_VARIABLE = "HPC_TRAIN_TF_STARTUP_LOGS"
_ABSL = r"[IWE]\d{4} [\d:.]+ +\d+ "
# Only these, word for word: an unknown message, an error above all, is never hidden.
NOISE = re.compile("|".join([
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR",
    _ABSL + r"cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine, GPU will not be used\.",
    _ABSL + r"cuda_platform\.cc:\d+\] failed call to cuInit: .*",
    _ABSL + r"cuda_executor\.cc:\d+\] .*(no NVIDIA GPU device|kernel driver does not appear).*",
    _ABSL + r"cpu_feature_guard\.cc:\d+\] This TensorFlow binary is optimized to use available CPU instructions.*",
    r"To enable the following instructions: .*, in other operations, rebuild TensorFlow with the appropriate "
    r"compiler flags\.",
    _ABSL + r"port\.cc:\d+\] oneDNN custom operations are on\..*",
    # A multi-worker cluster's start: each task's server, the coordination service meeting every task.
    _ABSL + r"grpc_server_lib\.cc:\d+\] Started server with target: grpc://\S+",
    _ABSL + r"coordination_service\.cc:\d+\] Initializing CoordinationService",
    _ABSL + r"coordination_service\.h:\d+\] /job:\w+/replica:\d+/task:\d+ has connected to coordination service\."
    r" Incarnation: \d+",
    _ABSL + r"coordination_service\.cc:\d+\] Waiting for \d+/\d+ tasks to connect\.",
    _ABSL + r"coordination_service\.cc:\d+\] Example stragglers:",
    r"/job:\w+/replica:\d+/task:\d+",  # a straggler, a line each after the one above
    _ABSL + r"coordination_service_agent\.cc:\d+\] Coordination agent has successfully connected\.",
    _ABSL + r"coordination_service\.cc:\d+\] Barrier\(WaitForAllTasks::[\d:]+\) has passed with status: OK",
    # The input pipeline's first batch, every run.
    _ABSL + r"generator_dataset_op\.cc:\d+\] Memory patch applied: M_TRIM_THRESHOLD=\d+ kb was set\.",
    _ABSL + r"dataset\.cc:\d+\] Input of GeneratorDatasetOp::Dataset will not be optimized because the dataset "
    r"does not implement the AsGraphDefInternal\(\) method needed to apply optimizations\.",
]))
# How the NOISE lines begin: an absl prefix (a letter and 4 digits, perhaps still being written), or these words.
_NOISE_START = re.compile(r"[IWE](\d{0,3}$|\d{4}( |$))")
_NOISE_OPENINGS = ("WARNING: All log messages before absl::InitializeLog()", "To enable the following instructions: ",
                   "/job:")
# How much of a line already passed on is kept to match the watched patterns against.
_WATCHED_TAIL = 4096
# Signals Slurm sends every process of a step; the filter must outlive the task to pass on its last words.
_OUTLIVE = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGCONT)


def is_noise(line: str) -> bool:
    """Whether a line of stderr is TensorFlow's CPU-node start-up noise."""
    return NOISE.fullmatch(line.rstrip("\r\n")) is not None


def wanted(environ: Mapping[str, str], tensorflow_imported: bool) -> bool:
    """Filter the stderr of every run (a Slurm task's, --local's, a plain `hpc-train train`), unless asked not to or
    too late (TensorFlow has started already)."""
    return environ.get(SHOW_VARIABLE, "") in ("", "0") and not tensorflow_imported


class _Filter:
    """This process's filter: its pid, the stderr it writes to (kept, to come back to), and whether it has ended."""

    def __init__(self, pid: int, original_stderr: int) -> None:
        self.pid = pid
        self.original_stderr = original_stderr
        self.ended = threading.Event()
        self.draining = False


_filter: _Filter | None = None  # this process's filter, until drained
# A line this process writes into its own filter to say "the command failed" (a NUL first: no program's output).
FAILED = b"\x00hpc-train: the command failed"

Watched = Sequence[tuple[re.Pattern[str], str]]  # a line to look out for, and what to add at the end if it came


def filter_stderr(watch: Watched = ()) -> None:
    """Route this process's stderr (fd 2, inherited by children) through a filter process; call before TensorFlow.

    `watch`: (pattern, words) pairs: when a line matching a pattern went through and `say_failed()` was called,
    the filter ends the stream with those words, after every line of the command, once each."""
    global _filter
    if not wanted(os.environ, "tensorflow" in sys.modules):
        return
    read_end, write_end = os.pipe()
    sys.stderr.flush()
    original = os.dup(2)
    os.set_inheritable(original, False)
    pid = os.fork()
    if pid == 0:  # the filter: no threads yet, nothing of TensorFlow
        try:
            os.close(write_end)
            for signum in _OUTLIVE:
                signal.signal(signum, signal.SIG_IGN)
            _copy_without_noise(read_end, 2, watch)
        finally:
            os._exit(0)  # never back into the caller's code, whatever happened
    os.close(read_end)
    os.dup2(write_end, 2)
    os.close(write_end)
    _filter = _Filter(pid, original)
    threading.Thread(target=_watch, args=(_filter,), name="hpc-train stderr filter", daemon=True).start()
    atexit.register(drain)


def say_failed() -> None:
    """Tell this process's filter that the command failed: it adds the words of the watched lines it saw."""
    if _filter is not None:
        sys.stderr.flush()
        os.write(2, FAILED + b"\n")


def _watch(running: _Filter) -> None:
    """Wait for the filter to end; if it ends before the task drained it (killed, crashed), stderr goes straight
    to the log again: unfiltered, but never lost."""
    try:
        os.waitpid(running.pid, 0)
    except ChildProcessError:
        pass
    if not running.draining:
        os.dup2(running.original_stderr, 2)
        os.write(2, b"hpc-train: warning: the filter of TensorFlow's start-up lines stopped; this rank's stderr goes "
                    b"to its log unfiltered from here\n")
    running.ended.set()


def drain(timeout: float = 2.0) -> None:
    """Before this process exits: close its end of the pipe and wait (a while) until the filter has written
    everything, so that a kill of the step's leftover processes cannot cut off its last words. Whatever is
    written after this goes to the log directly."""
    global _filter
    if _filter is None:
        return
    running, _filter = _filter, None
    running.draining = True
    sys.stderr.flush()
    os.dup2(running.original_stderr, 2)  # our end of the pipe closed; a child still holding it keeps the filter
    running.ended.wait(timeout)  # going: hence the bounded wait


def _copy_without_noise(source: int, target: int, watch: Watched = ()) -> None:
    """Copy `source` to `target` until end of file, leaving out the noise; at the end, after a FAILED line, the
    words of the watched lines that passed. Whole lines are judged; a part of a line that cannot become noise
    (a `\r` progress bar, a prompt) is passed on at once rather than held until its newline."""
    pending = b""  # the current line's bytes not written yet
    passed = False  # part of the current line was written already: it cannot be noise
    tail = b""  # the end of what was written of it, for the watched patterns (bounded: a progress bar never ends)
    seen: set[int] = set()
    failed = False
    while chunk := os.read(source, 65536):
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        kept = []
        for line in lines:
            if line.endswith(FAILED):  # said by the supervising process (after the command's last line, if partial)
                failed, line = True, line[:-len(FAILED)]
                if not line and not passed:
                    continue
            whole = (tail + line).decode("utf-8", "replace")
            if passed or not is_noise(whole):
                kept.append(line + b"\n")
                seen.update(index for index, (pattern, _) in enumerate(watch) if pattern.search(whole))
            passed, tail = False, b""
        if pending and (passed or not _may_become_noise(pending.decode("utf-8", "replace"))):
            kept.append(pending)
            passed, tail, pending = True, (tail + pending)[-_WATCHED_TAIL:], b""
        if kept:
            _write_all(target, b"".join(kept))
    if pending:
        _write_all(target, pending)
    if failed and seen:
        if pending or passed:
            _write_all(target, b"\n")  # the words on a line of their own
        _write_all(target, b"".join(watch[index][1].encode() + b"\n" for index in sorted(seen)))


def _may_become_noise(fragment: str) -> bool:
    """Whether the start of a line, its end not yet read, could still turn out to be one of the NOISE lines."""
    return bool(_NOISE_START.match(fragment)) or any(start.startswith(fragment) or fragment.startswith(start)
                                                     for start in _NOISE_OPENINGS)


def _write_all(target: int, data: bytes) -> None:
    while data:
        data = data[os.write(target, data):]
