"""A time-limit warning passed on to a command only once the command catches it.

The supervisor passes Slurm's warning on to the command as the signal it expects (SIGTERM for TensorFlow's
PreemptionCheckpointHandler, SIGUSR1 for a USR2 job). A signal's default action ends a process: a warning that
arrives while the command is still starting (importing TensorFlow, building its strategy: seconds, tens of seconds
on a loaded node), or once it has finished and Python is shutting down, killed it, and the job counted a rank that
died (retried from scratch on other nodes, its node excluded) where it had been warned to save and go on later.

So a warning waits until the command's process catches the signal (Linux's /proc/PID/status, `SigCgt`), then
reaches it at once; a command that never catches it gets it after HOLD_SECONDS all the same (its default action,
as before: a command that does not save ends), and one that ends first never gets it.

TensorFlow is a case apart: a multi-worker strategy's coordination service catches SIGTERM from the moment the
strategy is made, and only logs it ("SIGTERM caught"); a PreemptionCheckpointHandler made after takes SIGTERM over.
A warning that comes before the handler exists reaches that logger, not the handler: the job trains on, unsaved,
as one that ignores its warning would (no longer killed and retried elsewhere, its node wrongly excluded).
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

# At most half the warning's usual lead (USR1@120) spent waiting; the rest is the command's, to save.
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


def pass_on(child: subprocess.Popen[bytes], signum: int, at_most: float = HOLD_SECONDS) -> None:
    """Send `signum` to `child` once it catches it, or after `at_most` seconds; never to a child that has ended.
    Returns at once: the wait, if any, is a thread's (called from a signal handler)."""
    if catches(child.pid, signum) is not False:  # caught, or no way to know: as before, at once
        _send(child, signum)
        return
    threading.Thread(target=_held, args=(child, signum, at_most), name="warning-hold", daemon=True).start()


def _held(child: subprocess.Popen[bytes], signum: int, at_most: float) -> None:
    deadline = time.monotonic() + at_most
    while time.monotonic() < deadline and catches(child.pid, signum) is False:
        time.sleep(POLL_SECONDS)
    _send(child, signum)


def _send(child: subprocess.Popen[bytes], signum: int) -> None:
    if child.poll() is None:
        child.send_signal(signum)
