"""What a test session makes once for all its pytest-xdist workers: a trainer run several tests read, a server.

A session-scoped fixture is made once per worker; a TensorFlow run costs several seconds of CPU (its import
alone about 4), so a reference run that tests of two workers need is made by the first of them, under a lock
in the folder the session's workers share, and read by the others (as pytest-xdist's docs advise).
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def session_folder(factory: pytest.TempPathFactory) -> Path:
    """The folder this session's workers share: the workers' base folders' parent under xdist, else its own."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def held(lock: Path, shared: bool = False) -> Iterator[None]:
    """`lock` taken (exclusive, or shared with other holders of a shared one) while the block runs."""
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def made_once(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """A folder `make` fills once a session, whichever worker asks first; the others wait for it. One that
    failed (an assertion in `make`) is made again by the next test that asks, and fails that one too."""
    root = session_folder(factory)
    folder, done = root / name, root / f"{name}.done"
    with held(root / f"{name}.lock"):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            done.touch()
    return folder
