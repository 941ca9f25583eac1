"""`precision: auto`: the fastest Keras dtype policy the hardware this rank sees computes well, and why.

The choice is pure (`choose`): from the CPU's flags (/proc/cpuinfo) and the
compute capabilities of the GPUs TensorFlow uses. The GPU computes when there
is one, so its capability decides; else the CPU's bf16 units do:

- mixed_bfloat16: a GPU of compute capability 8.0 or newer (Ampere on), or a
  CPU with AMX or AVX512-BF16 (oneDNN's bf16 kernels);
- mixed_float16: Volta and Turing GPUs (7.x), whose tensor cores have float16
  but not bfloat16; Keras' compile wraps the optimizer in a LossScaleOptimizer;
- float32 elsewhere, where 16-bit compute is emulated and slower.

An explicit `precision` always wins. Nothing here imports TensorFlow at import
time (the CLI, doctor and the benchmarks' machine line read it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

AUTO = "auto"
# The CPU flags that mean native bf16 arithmetic, strongest first, and how they are named in lines.
BF16_FLAGS = (("amx_bf16", "AMX"), ("avx512_bf16", "AVX512-BF16"))
AMPERE = (8, 0)
VOLTA = (7, 0)
# Weakest first: when the ranks of a job chose differently, the weakest common one is what all of them run.
ORDER = ("float32", "mixed_float16", "mixed_bfloat16")


@dataclass(frozen=True)
class Hardware:
    """What one rank computes on: its CPU's flags and the (major, minor) compute capability of each GPU used."""

    cpu_flags: frozenset[str] = frozenset()
    gpu_capabilities: tuple[tuple[int, int], ...] = ()
    # TensorFlow's bf16 kernels for CPUs are oneDNN's: with TF_ENABLE_ONEDNN_OPTS=0, bf16 is emulated and slower.
    onednn: bool = True


@dataclass(frozen=True)
class Precision:
    """The dtype policy a run uses and why, as lines and metrics.json say it."""

    policy: str
    why: str

    def describe(self) -> str:
        """"precision mixed_bfloat16 (auto: the CPU has AMX)"."""
        return f"precision {self.policy} ({self.why})"


def choose(requested: str, hardware: Hardware) -> Precision:
    """The policy for `requested` (a policy name, or auto) on this hardware."""
    if requested != AUTO:
        return Precision(requested, "as configured")
    if hardware.gpu_capabilities:
        return _for_gpus(hardware.gpu_capabilities)
    return _for_cpu(hardware.cpu_flags, hardware.onednn)


def _for_gpus(capabilities: Sequence[tuple[int, int]]) -> Precision:
    # Several GPUs of one rank run in lockstep: the weakest decides.
    major, minor = min(capabilities)
    shown = f"compute capability {major}.{minor}"
    if (major, minor) >= AMPERE:
        return Precision("mixed_bfloat16", f"auto: the GPU is Ampere or newer, {shown}")
    if (major, minor) >= VOLTA:
        return Precision("mixed_float16", f"auto: the GPU is Volta or Turing, {shown}; float16 with loss scaling")
    return Precision("float32", f"auto: the GPU has no fast 16-bit format, {shown}")


def _for_cpu(flags: frozenset[str], onednn: bool) -> Precision:
    for flag, name in BF16_FLAGS:
        if flag in flags:
            if not onednn:
                return Precision("float32", f"auto: the CPU has {name}, but TF_ENABLE_ONEDNN_OPTS=0 leaves it unused")
            return Precision("mixed_bfloat16", f"auto: the CPU has {name}")
    return Precision("float32", "auto: the CPU has no bf16 units (AMX, AVX512-BF16)")


def common(own: Precision, counts: Mapping[str, int]) -> Precision:
    """The job's policy from how many replicas chose each (own: this rank's choice): their one choice, or, where
    they differ, the weakest of them (float32 below mixed_float16 below mixed_bfloat16) so that every rank runs
    the same arithmetic and holds the same optimizer state."""
    chosen = [policy for policy in ORDER if counts.get(policy, 0) > 0]
    if len(chosen) <= 1:
        return own
    weakest = chosen[0]
    shown = ", ".join(f"{policy} on {counts[policy]}" for policy in chosen)
    return Precision(weakest, f"auto: the replicas' hardware differs ({shown}): the weakest, which all run")


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The CPU's flags from /proc/cpuinfo's text (read here when not given); empty where there is none."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return frozenset()
    line = next((line for line in cpuinfo.splitlines() if line.startswith(("flags", "Features"))), "")
    return frozenset(line.partition(":")[2].split())


def vector_units(flags: Iterable[str]) -> str:
    """The CPU's widest vector and matrix units in words, for benchmark machine lines: "AVX-512, AMX, bf16"."""
    flags = frozenset(flags)
    units = ["AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"]
    if "amx_tile" in flags:
        units.append("AMX")
    if any(flag in flags for flag, _ in BF16_FLAGS):
        units.append("bf16")
    return ", ".join(units)


def gpu_capabilities() -> tuple[tuple[int, int], ...]:
    """The compute capability of each GPU TensorFlow sees (imports TensorFlow: call it on a compute node)."""
    import tensorflow as tf

    found = []
    for gpu in tf.config.list_physical_devices("GPU"):
        capability = tf.config.experimental.get_device_details(gpu).get("compute_capability")
        if capability:
            found.append((int(capability[0]), int(capability[1])))
    return tuple(found)


def this_rank(requested: str) -> Precision:
    """The choice on the hardware this process sees (TensorFlow only where auto needs the GPUs')."""
    if requested != AUTO:
        return choose(requested, Hardware())
    onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1").strip().lower() not in ("0", "false")
    return choose(requested, Hardware(cpu_flags(), gpu_capabilities(), onednn))


# What Slurm sets where a job's nodes hold GPUs (a heterogeneous job's per component, _HET_GROUP_N).
GPU_VARIABLES = ("SLURM_GPUS_ON_NODE", "SLURM_JOB_GPUS", "SLURM_GPUS_PER_NODE", "SLURM_GPUS", "SLURM_GPUS_PER_TASK")


def for_parameter_servers(chief: Precision, environ: Mapping[str, str]) -> Precision:
    """auto under parameter_server: the chief decides (it traces every step the workers run) but never sees a GPU
    (the bootstrap gives it none). Where the job's nodes hold GPUs, the workers' kind is unknown to it: float32,
    saying how to choose; else the chief's CPU rule (pure)."""
    job_has_gpus = any(value.strip() not in ("", "0") for name, value in environ.items()
                       if name.startswith(GPU_VARIABLES))
    if not job_has_gpus:
        return chief
    return Precision("float32", "auto: the workers' GPUs are not visible to the chief, which traces their steps; set "
                                "precision=mixed_bfloat16 for Ampere or newer, mixed_float16 for Volta or Turing")


def job_precision(requested: str, strategy: Any) -> Precision:
    """This rank's dtype policy and why; under MultiWorkerMirrored with auto, the job's: one tiny all-reduce of
    each replica's choice, so that all of them run the same arithmetic (precision.common). A parameter-server
    job's chief traces every step the workers run: its choice is the job's (for_parameter_servers)."""
    from hpc_train.training.callbacks import summed_over_ranks
    from hpc_train.training.keras import tf

    own = this_rank(requested)
    if requested == AUTO and isinstance(strategy, tf.distribute.experimental.ParameterServerStrategy):
        return for_parameter_servers(own, os.environ)
    if requested != AUTO or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return own
    counts = summed_over_ranks(strategy)(tf.constant([float(own.policy == policy) for policy in ORDER])).numpy()
    return common(own, {policy: round(float(count)) for policy, count in zip(ORDER, counts)})
