"""nvidia.py: `nvidia-smi -L` asked on this machine; missing, failing or silent means no listing."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.bootstrap.devices import ListedGpu
from hpc_train.bootstrap.nvidia import list_gpus
from tests.fake_nvidia import install_nvidia_smi, path_without_nvidia_smi, uuid


def test_the_gpus_are_those_nvidia_smi_lists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", install_nvidia_smi(tmp_path, 2))
    assert list_gpus() == ((ListedGpu(0, uuid(0)), ListedGpu(1, uuid(1))), "nvidia-smi -L lists 2")


@pytest.mark.parametrize("fake, source", [
    (None, "no nvidia-smi on PATH"),
    ({"count": 1, "code": 9}, "nvidia-smi -L failed (exit 9)"),
    ({"count": 1, "sleep": 5}, "nvidia-smi -L gave no answer in 0.5 s"),
])
def test_no_listing_without_a_working_nvidia_smi(fake: dict | None, source: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", install_nvidia_smi(tmp_path, **fake) if fake else path_without_nvidia_smi())
    assert list_gpus(timeout=0.5) == (None, source)
