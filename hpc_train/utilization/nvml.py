"""The seam to NVIDIA's NVML: a GPU's utilization and memory through nvidia-ml-py's `pynvml`, loaded lazily.

`open_nvml(binding)` takes pynvml or anything with its functions: unit tests pass a stand-in that reports chosen
utilizations; end-to-end tests put a stand-in `pynvml` module first on PYTHONPATH, as tests/fake_nvidia.py puts
a stand-in nvidia-smi first on PATH. No binding, no driver (libnvidia-ml is missing), or NVML failing to start:
None, and the node is sampled without GPUs; a GPU that fails to answer is left out of that sample. Never an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GpuReading:
    utilization: float  # percent of the last sample period in which a kernel ran (NVML's own period)
    memory_used: int  # bytes
    memory_total: int


class Nvml:
    """NVML, started: the GPUs it counts, and a reading of one by the id CUDA_VISIBLE_DEVICES names it with."""

    def __init__(self, binding: Any) -> None:
        self.binding = binding

    def indexes(self) -> tuple[str, ...]:
        """Every GPU NVML counts here, as ids (`0`, `1`, ...)."""
        try:
            return tuple(str(index) for index in range(int(self.binding.nvmlDeviceGetCount())))
        except Exception:  # noqa: BLE001 - a driver's failure must not reach a rank
            return ()

    def read(self, device: str) -> GpuReading | None:
        """The GPU `device` names (an index, or a UUID as CUDA takes it); None when NVML cannot read it."""
        nvml = self.binding
        try:
            if device.isdigit():
                handle = nvml.nvmlDeviceGetHandleByIndex(int(device))
            elif device.startswith("GPU-"):
                handle = nvml.nvmlDeviceGetHandleByUUID(device)
            else:
                return None  # a MIG device: NVML reads its parent GPU, not it
            rates, memory = nvml.nvmlDeviceGetUtilizationRates(handle), nvml.nvmlDeviceGetMemoryInfo(handle)
            return GpuReading(float(rates.gpu), int(memory.used), int(memory.total))
        except Exception:  # noqa: BLE001 - a GPU that fell off the bus, a driver's failure: not sampled this time
            return None

    def close(self) -> None:
        try:
            self.binding.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def open_nvml(binding: Any = None) -> Nvml | None:
    """NVML started through `binding` (default: pynvml, when installed); None where it cannot start."""
    if binding is None:
        try:
            import pynvml as binding  # nvidia-ml-py: pure Python, loads libnvidia-ml at nvmlInit
        except ImportError:
            return None
    try:
        binding.nvmlInit()
    except Exception:  # noqa: BLE001 - NVMLError_LibraryNotFound (no driver), DriverNotLoaded, ...
        return None
    return Nvml(binding)
