"""The edge that asks this machine for its GPUs: `nvidia-smi -L`, bounded by a timeout.

Without TensorFlow (the launcher starts before any rank imports it, and a rank checks its binding before it
does). Reading the answer is devices.parse_gpu_list's (pure).
"""

from __future__ import annotations

import shutil
import subprocess
from typing import NamedTuple

from hpc_train.bootstrap.devices import ListedGpu, parse_gpu_list

NVIDIA_SMI = "nvidia-smi"
TIMEOUT_SECONDS = 15.0  # a healthy nvidia-smi answers in well under a second; a wedged driver must not hang a start


class GpuListing(NamedTuple):
    """What nvidia-smi said: the GPUs, or None when it is not here or failed; and how we know, for messages."""

    gpus: tuple[ListedGpu, ...] | None
    source: str


def list_gpus(timeout: float = TIMEOUT_SECONDS) -> GpuListing:
    """This machine's GPUs per `nvidia-smi -L` (found on PATH); a missing or failing nvidia-smi lists none."""
    program = shutil.which(NVIDIA_SMI)
    if program is None:
        return GpuListing(None, "no nvidia-smi on PATH")
    try:
        done = subprocess.run([program, "-L"], capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return GpuListing(None, f"nvidia-smi -L gave no answer in {timeout:g} s")
    except OSError as error:
        return GpuListing(None, f"nvidia-smi -L did not run: {error.strerror}")
    if done.returncode != 0:
        return GpuListing(None, f"nvidia-smi -L failed (exit {done.returncode})")
    gpus = parse_gpu_list(done.stdout)
    return GpuListing(gpus, f"nvidia-smi -L lists {len(gpus)}")
