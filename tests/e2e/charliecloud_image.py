"""The Charliecloud image of tests/e2e/test_containers.py: Debian's minimal system and its python3, built without a
registry (debootstrap, about 40 s and 260 MB on an idle machine) and kept in /tmp/hpc-train-ch-image for the next
session; never committed.

env/test.sh starts the build in the background (`python3 tests/e2e/charliecloud_image.py`) while the Python
packages install and the tests start: built by the test's fixture, it took 100 s of the longest cluster group's
time on a fresh machine. Whoever builds holds a lock, so the fixture, coming while env/test.sh's build runs, waits
for that one rather than starting another. Standard library only: it runs before the project's .venv exists.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

IMAGE = Path("/tmp/hpc-train-ch-image")
LOCK = IMAGE.with_name(f"{IMAGE.name}.lock")
BUILD_SECONDS = 1200


def ready() -> bool:
    return (IMAGE / "usr" / "bin" / "python3").exists()


def can_build() -> bool:
    return shutil.which("ch-run") is not None and (ready() or shutil.which("debootstrap") is not None)


def build() -> str | None:
    """The image, built unless it is there (a build elsewhere waited for): None once it is, else why not."""
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # (released when the file closes, also when its process dies)
        if ready():
            return None
        building = IMAGE.with_name(f"{IMAGE.name}.build-{os.getpid()}")
        try:
            built = subprocess.run(["debootstrap", "--variant=minbase", "--include=python3", "bookworm",
                                    str(building)], capture_output=True, text=True, timeout=BUILD_SECONDS)
        except (OSError, subprocess.TimeoutExpired) as error:
            shutil.rmtree(building, ignore_errors=True)
            return str(error)
        if built.returncode != 0:
            shutil.rmtree(building, ignore_errors=True)
            return built.stderr[-500:] or f"debootstrap exited {built.returncode}"
        building.rename(IMAGE)
        return None


if __name__ == "__main__":
    if not can_build():
        sys.exit(0)  # (no ch-run or debootstrap: the test skips, saying so)
    failed = build()
    if failed:
        print(f"tests/e2e/charliecloud_image.py: debootstrap could not build the image: {failed}", file=sys.stderr)
    sys.exit(1 if failed else 0)
