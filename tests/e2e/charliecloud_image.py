"""The Charliecloud image of tests/e2e/test_containers.py: Debian's minimal system and its python3, built without a
registry (debootstrap, about 40 s and 260 MB on an idle machine) and kept in /tmp/hpc-train-ch-image for the next
session; never committed.

env/test.sh starts the build in the background (`.venv/bin/python tests/e2e/charliecloud_image.py`) once the
packages are installed, while the tests start: built by the test's fixture, it took 100 s of the longest cluster
group's time on a fresh machine. Whoever builds holds a lock, so the fixture, coming while env/test.sh's build
runs, waits for that one rather than starting another; a build that failed says why for an hour (its lines kept),
and is not tried again meanwhile. The lock and that record are in a folder of root's alone (the build runs as root).
Standard library only.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

IMAGE = Path("/tmp/hpc-train-ch-image")
STATE = Path("/tmp/hpc-train-ch-image.state")  # the lock and a failed build's record, mode 700
BUILD_SECONDS = 1200
FAILURE_KEPT_SECONDS = 3600


def ready() -> bool:
    return (IMAGE / "usr" / "bin" / "python3").exists()


def can_build() -> bool:
    return shutil.which("ch-run") is not None and (ready() or shutil.which("debootstrap") is not None)


def state_folder() -> Path:
    """The lock's and the failure record's folder: made ours alone, refused if someone else's."""
    STATE.mkdir(mode=0o700, exist_ok=True)
    if STATE.is_symlink() or STATE.stat().st_uid != os.getuid():
        raise PermissionError(f"{STATE} is not this user's own folder: remove it")
    STATE.chmod(0o700)
    return STATE


def build() -> str | None:
    """The image, built unless it is there (a build elsewhere waited for): None once it is, else why not."""
    folder = state_folder()
    failed = folder / "failed"
    with open(folder / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # (released when the file closes, also when its process dies)
        if ready():
            return None
        if failed.exists() and time.time() - failed.stat().st_mtime < FAILURE_KEPT_SECONDS:
            return failed.read_text()
        for leftover in [*IMAGE.parent.glob(f"{IMAGE.name}.build-*"), IMAGE]:  # a build killed midway
            shutil.rmtree(leftover, ignore_errors=True)
        why = debootstrap(IMAGE.with_name(f"{IMAGE.name}.build-{os.getpid()}"))
        if why is None:
            failed.unlink(missing_ok=True)
        else:
            failed.write_text(why)
        return why


def debootstrap(building: Path) -> str | None:
    """Debian into `building`, then renamed the image: None, or why not (the folder removed)."""
    process = subprocess.Popen(["debootstrap", "--variant=minbase", "--include=python3", "bookworm", str(building)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, errors = process.communicate(timeout=BUILD_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # debootstrap's children (dpkg, its downloads) with it
        process.wait()
        errors = f"debootstrap took over {BUILD_SECONDS} s"
    if process.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        return (errors or "")[-500:] or f"debootstrap exited {process.returncode}"
    building.rename(IMAGE)
    return None


if __name__ == "__main__":
    if not can_build():
        sys.exit(0)  # (no ch-run or debootstrap: the test skips, saying so)
    why = build()
    if why:
        print(f"tests/e2e/charliecloud_image.py: debootstrap could not build the image: {why}", file=sys.stderr)
    sys.exit(1 if why else 0)
