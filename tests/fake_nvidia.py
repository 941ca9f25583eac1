"""A fake `nvidia-smi` on PATH: `-L` answers as the real one did on an H200 machine, a line per GPU."""

from __future__ import annotations

import os
import stat
from pathlib import Path

# The real line, from an H200 machine; more GPUs vary the UUID's last digits.
H200_LINE = "GPU {index}: NVIDIA H200 (UUID: {uuid})"


def uuid(index: int) -> str:
    return f"GPU-322a5082-f813-4312-b977-d11a606473{41 + index:02d}"


def gpu_lines(count: int) -> str:
    return "".join(H200_LINE.format(index=index, uuid=uuid(index)) + "\n" for index in range(count))


def install_nvidia_smi(folder: Path, count: int, *, code: int = 0, sleep: float = 0) -> str:
    """Write folder/nvidia-smi listing `count` GPUs and exiting `code` (or, with `sleep`, silent that long: one
    process, as a wedged nvidia-smi is); return a PATH with it first."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    script.write_text("#!/bin/sh\n"
                      f"{f'exec sleep {sleep}' if sleep else ''}\n"
                      '[ "$1" = "-L" ] || { echo "fake nvidia-smi: only -L" >&2; exit 2; }\n'
                      f"printf '%s' '{gpu_lines(count)}'\nexit {code}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"


def path_without_nvidia_smi() -> str:
    """A PATH on which no nvidia-smi is found: this machine's PATH minus the folders that hold one."""
    kept = [part for part in os.environ.get("PATH", "").split(os.pathsep)
            if part and not (Path(part) / "nvidia-smi").exists()]
    return os.pathsep.join(kept)
