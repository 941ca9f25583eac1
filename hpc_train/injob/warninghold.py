"""A time-limit warning passed on to a command only once the command catches it.

The supervisor passes Slurm's warning on to the command as the signal it expects (SIGTERM for TensorFlow's
PreemptionCheckpointHandler, SIGUSR1 for a USR2 job). A signal's default action ends a process: a warning that
arrives while the command is still starting (importing TensorFlow, building its strategy: seconds, tens of seconds
on a loaded node), or once it has finished and Python is shutting down, killed it, and the job counted a rank that
died (retried from scratch on other nodes, its node excluded) where it had been warned to save and go on later.

So a warning waits until the command's process catches the signal (Linux's /proc/PID/status, `SigCgt`), then
reaches it at once; a command that never catches it gets it after HOLD_SECONDS all the same (its default action,
as before: a command that does not save ends), and one that ends first never gets it. The command's own process
is the one read: a wrapper that does not exec (`bash train.sh`, `uv run`) is read, not the Python it starts.
The rank's log says when a warning waited, and how long.

TensorFlow is a case apart: a multi-worker strategy's coordination service catches SIGTERM from the moment the
strategy is made, and only logs it ("SIGTERM caught"); a PreemptionCheckpointHandler made after takes SIGTERM over.
A warning that comes before the handler exists reaches that logger, not the handler: the job trains on, unsaved,
as one that ignores its warning would (no longer killed and retried elsewhere, its node wrongly excluded).
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

# At most half the warning's default lead (USR1@120, --signal-seconds) spent waiting; the rest is the command's, to
# save. (A shorter --signal-seconds leaves less: the hold does not know the lead.)
HOLD_SECONDS = 60.0
POLL_SECONDS = 0.05


def caught_signals(status: str) -> frozenset[int]:
    """The signals a process catches, from its /proc/PID/status text (pure): SigCgt's hexadecimal mask, bit N-1
    for signal N."""
    for line in status.splitlines():
        if line.startswith("SigCgt:"):
            mask = int(line.split(":", 1)[1].strip(), 16)
            return frozenset(bit + 1 for bit in range(mask.bit_length()) if mask >> bit & 1)
    return frozenset()


def catches(pid: int, signum: int) -> bool | None:
    """Whether process `pid` catches `signum` now; None where /proc cannot say (not Linux, the process gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return signum in caught_signals(status)


def pass_on(child: subprocess.Popen[bytes], signum: int, at_most: float = HOLD_SECONDS,
            say: Callable[[str], None] = lambda line: None) -> None:
    """Send `signum` to `child` once it catches it, or after `at_most` seconds; never to a child that has ended.
    Blocks while it waits: a thread's work, never a signal handler's. `say`: a line when it holds the signal, and
    one when it sends it after holding it."""
    name = signal.Signals(signum).name
    started = time.monotonic()
    caught = catches(child.pid, signum)
    held = caught is False
    if held:
        say(f"the time-limit warning waits until the command catches {name} (at most {at_most:.0f} s)")
        while time.monotonic() - started < at_most and child.returncode is None:
            time.sleep(POLL_SECONDS)
            if (caught := catches(child.pid, signum)) is not False:
                break
    if child.returncode is not None:  # ended first: reaped by the thread that waits for it
        return
    child.send_signal(signum)
    if held and caught is not None:
        how = "the command catches it" if caught else "the command never caught it"
        say(f"passed the time-limit warning on as {name} after {time.monotonic() - started:.1f} s ({how})")
