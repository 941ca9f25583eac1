"""The NVML seam: no binding or no driver is no GPU and no error; a GPU that fails is left out; ids as CUDA's."""

from __future__ import annotations

import sys

import pytest

from hpc_train.utilization.nvml import GpuReading, open_nvml
from tests.fake_nvidia import uuid
from tests.fake_nvml import MEMORY_TOTAL, FakeNvml


def test_without_the_binding_installed_there_is_no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    assert open_nvml() is None


def test_without_the_driver_there_is_no_nvml() -> None:
    class NoDriver(FakeNvml):
        def nvmlInit(self) -> None:
            raise OSError("NVML Shared Library Not Found")  # as pynvml's NVMLError_LibraryNotFound

    assert open_nvml(NoDriver({0: 50.0})) is None


def test_the_real_binding_on_a_machine_without_a_driver_is_no_nvml_and_no_error() -> None:
    pytest.importorskip("pynvml")
    from pathlib import Path

    if Path("/proc/driver/nvidia/version").exists():
        pytest.skip("this machine has NVIDIA's driver")
    assert open_nvml() is None


def test_gpus_are_read_by_index_or_uuid_and_a_failing_one_is_left_out() -> None:
    fake = FakeNvml({0: 97.0, 1: None, 2: 0.0})
    nvml = open_nvml(fake)
    assert nvml is not None and nvml.indexes() == ("0", "1", "2")
    assert nvml.read("0") == GpuReading(97.0, int(MEMORY_TOTAL * 97 / 200), MEMORY_TOTAL)
    assert nvml.read(uuid(2)) == GpuReading(0.0, 0, MEMORY_TOTAL)
    assert nvml.read("1") is None and nvml.read("7") is None and nvml.read("MIG-0a1b") is None
    nvml.close()
    assert fake.shut == 1
