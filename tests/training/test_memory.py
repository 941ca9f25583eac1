"""The malloc settings a training process starts with."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from hpc_train.training.memory import keep_freed_memory


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_glibc_takes_every_setting() -> None:
    # In a child: the settings last for the whole process, and this one runs the other tests.
    script = "from hpc_train.training.memory import keep_freed_memory; print(keep_freed_memory())"
    assert subprocess.run([sys.executable, "-c", script], capture_output=True, text=True).stdout == "True\n"


def test_elsewhere_it_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "libc_ver", lambda: ("", ""))
    assert keep_freed_memory() is False
