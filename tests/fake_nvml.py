"""A stand-in for NVIDIA's NVML binding (`pynvml`) that reports chosen utilizations, at the sampler's seam.

In-process: `FakeNvml(utilizations)` has pynvml's functions (utilizations by GPU index, changed as the test goes).
In a job: `install_pynvml(folder, utilizations)` writes a `pynvml` module that reads them from `folder/nvml.json` at
each call, and returns a PYTHONPATH with it first (as tests/fake_nvidia.py puts a stand-in nvidia-smi on PATH).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace

from tests.fake_nvidia import uuid

MEMORY_TOTAL = 141 * 2**30  # an H200's


class NVMLError(Exception):
    pass


class FakeNvml:
    """pynvml's functions the sampler calls; a GPU whose utilization is None fails to answer, as a lost GPU does."""

    def __init__(self, utilizations: Mapping[int, float | None]) -> None:
        self.utilizations = dict(utilizations)
        self.started = self.shut = 0

    def nvmlInit(self) -> None:
        self.started += 1

    def nvmlShutdown(self) -> None:
        self.shut += 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.utilizations)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if index not in self.utilizations:
            raise NVMLError("Invalid Argument")
        return index

    def nvmlDeviceGetHandleByUUID(self, name: str) -> int:
        return next(index for index in self.utilizations if uuid(index) == name)

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        if self.utilizations[handle] is None:
            raise NVMLError("GPU is lost")
        return SimpleNamespace(gpu=self.utilizations[handle], memory=0)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        used = int(MEMORY_TOTAL * (self.utilizations[handle] or 0) / 200)
        return SimpleNamespace(used=used, total=MEMORY_TOTAL, free=MEMORY_TOTAL - used)


_MODULE = '''"""A stand-in pynvml (tests/fake_nvml.py): the utilizations nvml.json beside it holds, by GPU index."""
import json, pathlib
from types import SimpleNamespace
_FILE = pathlib.Path(__file__).with_name("nvml.json")
class NVMLError(Exception):
    pass
def _utilizations():
    return {int(index): value for index, value in json.loads(_FILE.read_text()).items()}
def nvmlInit():
    _utilizations()
def nvmlShutdown():
    pass
def nvmlDeviceGetCount():
    return len(_utilizations())
def nvmlDeviceGetHandleByIndex(index):
    if index not in _utilizations():
        raise NVMLError("Invalid Argument")
    return index
def nvmlDeviceGetUtilizationRates(handle):
    return SimpleNamespace(gpu=_utilizations()[handle], memory=0)
def nvmlDeviceGetMemoryInfo(handle):
    return SimpleNamespace(used=2**30, total=%d, free=%d - 2**30)
''' % (MEMORY_TOTAL, MEMORY_TOTAL)


def set_utilizations(folder: Path, utilizations: Mapping[int, float]) -> None:
    temporary = folder / "nvml.json.new"
    temporary.write_text(json.dumps({str(index): value for index, value in utilizations.items()}))
    temporary.replace(folder / "nvml.json")


def install_pynvml(folder: Path, utilizations: Mapping[int, float]) -> str:
    """Write folder/pynvml.py reporting `utilizations`; return a PYTHONPATH with folder first."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pynvml.py").write_text(_MODULE)
    set_utilizations(folder, utilizations)
    return os.pathsep.join(part for part in (str(folder), os.environ.get("PYTHONPATH", "")) if part)
