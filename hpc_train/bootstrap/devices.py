"""GPUs: each task on a node gets its own, disjoint share; CPU-only nodes just work.

What a node has is read from Slurm's variables only (never from `nvidia-smi`):

- ``CUDA_VISIBLE_DEVICES``: the ids CUDA will accept in this task (Slurm sets it;
  under cgroup device constraints they are renumbered from 0), so shares are cut
  from this list when it is there;
- ``SLURM_STEP_GPUS`` / ``SLURM_JOB_GPUS``: the node's GPU ids, otherwise;
- ``SLURM_GPUS_ON_NODE``: how many GPUs the node was given.

If a task already sees fewer GPUs than its node was given, Slurm bound GPUs per
task (``--gpus-per-task``, ``--gpu-bind``): that binding is kept as it is. With
no GPU variable at all, device visibility is left alone. Tasks that do not
compute (the parameter-server chief and ps) are given no GPU in every case.
A task's share is written as the value it exports in ``CUDA_VISIBLE_DEVICES``:
``None`` means "leave it as Slurm set it", ``()`` means "no GPU".

Where no Slurm binds GPUs (the mock launcher: `hpc-train launch`, `submit --local`), what this machine has comes
from ``nvidia-smi -L`` (nvidia.py runs it); reading its lines, and matching ids against them, is pure and here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from hpc_train.bootstrap.nodelist import optional_count
from hpc_train.errors import HpcTrainError

# Values Slurm writes when a GPU gres has no device files behind it.
_NO_DEVICE_WORDS = frozenset({"", "nodevfiles", "none"})

Devices = tuple[str, ...] | None


@dataclass(frozen=True)
class NodeGpus:
    """The GPUs of the node a task runs on, as its environment describes them."""

    visible: tuple[str, ...]  # ids to cut shares from
    total: int  # GPUs the node was given
    narrowed: bool  # Slurm already bound GPUs per task
    known: bool  # any GPU variable was set at all
    source: str  # the variable the count came from, for messages

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> "NodeGpus":
        cuda = device_ids(env.get("CUDA_VISIBLE_DEVICES"))
        slurm_variable = next((name for name in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS") if name in env), None)
        slurm_ids = device_ids(env.get(slurm_variable)) if slurm_variable else None
        on_node = optional_count(env, "SLURM_GPUS_ON_NODE")
        if on_node is not None:
            total, source = on_node, f"SLURM_GPUS_ON_NODE={on_node}"
        elif slurm_ids is not None:
            total, source = len(slurm_ids), f"{slurm_variable}={env[slurm_variable]}"
        elif cuda is not None:
            total, source = len(cuda), f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']}"
        else:
            return cls((), 0, False, False, "no GPU variable")
        visible = cuda if cuda is not None else slurm_ids if slurm_ids is not None else _first_ids(total)
        return cls(visible, total, len(visible) < total, True, source)


def assign_devices(node_names: Sequence[str], node_of_rank: Sequence[int],
                   computes: Sequence[bool], gpus: NodeGpus) -> tuple[tuple[Devices, ...], tuple[str, ...]]:
    """Give every rank its devices; return them and notes for people.

    `computes[rank]` says whether the rank's role uses GPUs. Every node is assumed
    to have the GPUs this task's node has (Slurm's ``--gpus-per-node``); each task
    applies only its own share, which comes from its own node's variables.
    """
    devices: list[Devices] = [None if computing else () for computing in computes]
    if not gpus.known or gpus.narrowed:
        return tuple(devices), ()
    notes: list[str] = []
    shares_by_task_count: dict[int, list[tuple[str, ...]]] = {}  # nodes alike share one split
    for node, ranks in enumerate(_computing_ranks_by_node(node_of_rank, computes, len(node_names))):
        if not ranks:
            continue
        shares = shares_by_task_count.get(len(ranks))
        if shares is None:
            shares = shares_by_task_count[len(ranks)] = _split(node_names[node], len(ranks), gpus, notes)
        for rank, share in zip(ranks, shares):
            devices[rank] = share
    return tuple(devices), tuple(notes)


def _split(node_name: str, tasks: int, gpus: NodeGpus, notes: list[str]) -> list[tuple[str, ...]]:
    """Equal, disjoint shares of the node's GPUs for `tasks` tasks, in local order."""
    if gpus.total == 0:
        return [()] * tasks
    if tasks > gpus.total:
        counted = f"{gpus.total} GPU{'' if gpus.total == 1 else 's'}"
        raise HpcTrainError(
            f"{node_name} runs {tasks} GPU tasks but has {counted} ({gpus.source}); "
            f"start at most one task per GPU (e.g. --ntasks-per-node={gpus.total}) or ask for more GPUs")
    per_task = gpus.total // tasks
    if per_task * tasks < gpus.total:
        notes.append(f"{gpus.total} GPUs for {tasks} tasks on {node_name}: "
                     f"{per_task} each, {gpus.total - per_task * tasks} left idle")
    return [gpus.visible[slot * per_task:(slot + 1) * per_task] for slot in range(tasks)]


def _computing_ranks_by_node(node_of_rank: Sequence[int], computes: Sequence[bool],
                             node_count: int) -> list[list[int]]:
    by_node: list[list[int]] = [[] for _ in range(node_count)]
    for rank, node in enumerate(node_of_rank):
        if computes[rank]:
            by_node[node].append(rank)
    return by_node


def device_ids(value: str | None) -> tuple[str, ...] | None:
    """The device ids a CUDA_VISIBLE_DEVICES-like value names; None: unset (every device); (): none (pure)."""
    if value is None:
        return None
    if value.strip().lower() in _NO_DEVICE_WORDS:
        return ()
    return tuple(part.strip() for part in value.split(",") if part.strip())


def _first_ids(count: int) -> tuple[str, ...]:
    return tuple(str(index) for index in range(count))


NVIDIA_DRIVER = "/proc/driver/nvidia/version"  # there when the node has NVIDIA's kernel driver loaded


def cpu_fallback_note(cuda_visible_devices: str | None, tensorflow_gpus: int | None) -> str | None:
    """The line a task says when Slurm bound it to GPUs that TensorFlow cannot use (a CPU build, no driver).

    `tensorflow_gpus`: the GPUs TensorFlow lists; None when TensorFlow was not asked, only the driver found missing.
    """
    bound = [device for device in (device_ids(cuda_visible_devices) or ()) if not device.startswith("-")]
    if not bound or tensorflow_gpus:
        return None
    why = "TensorFlow sees no GPU" if tensorflow_gpus is not None else f"no GPU driver here ({NVIDIA_DRIVER})"
    return f"bound to GPU{'s' if len(bound) > 1 else ''} {','.join(bound)} by Slurm; {why}: CPU"


@dataclass(frozen=True)
class ListedGpu:
    """One GPU as `nvidia-smi -L` lists it: `GPU 0: NVIDIA H200 (UUID: GPU-322a5082-...)`, with the UUIDs of the
    MIG devices listed under it (`  MIG 1g.18gb Device 0: (UUID: MIG-...)`), which CUDA sees in its place."""

    index: int
    uuid: str
    migs: tuple[str, ...] = ()


_LISTED = re.compile(r"^GPU (\d+):.*\(UUID: (GPU-[0-9A-Za-z-]+)\)\s*$")
_MIG = re.compile(r"^MIG .*Device\s+\d+:.*\(UUID: (MIG-[0-9A-Za-z/-]+)\)\s*$")


def parse_gpu_list(text: str) -> tuple[ListedGpu, ...]:
    """The GPUs in `nvidia-smi -L`'s output, in its order, each with the MIG devices listed under it."""
    gpus: list[ListedGpu] = []
    for line in text.splitlines():
        if found := _LISTED.match(line.strip()):
            gpus.append(ListedGpu(int(found.group(1)), found.group(2)))
        elif (found := _MIG.match(line.strip())) and gpus:
            gpus[-1] = replace(gpus[-1], migs=(*gpus[-1].migs, found.group(1)))
    return tuple(gpus)


def cuda_devices(listed: Sequence[ListedGpu]) -> int:
    """How many devices CUDA numbers here: each GPU, or in its place each of its MIG devices."""
    return sum(len(gpu.migs) or 1 for gpu in listed)


def names_gpu(device: str, listed: Sequence[ListedGpu]) -> bool:
    """Whether a CUDA_VISIBLE_DEVICES id names one of `listed`: an index below CUDA's count (it numbers the
    devices it sees from 0, whatever their order; a MIG device counts in its GPU's place), or a GPU's or a MIG
    device's UUID or a prefix of exactly one (as CUDA takes them)."""
    if device.isdigit():
        return int(device) < cuda_devices(listed)
    if device.startswith("MIG-"):
        return sum(mig.startswith(device) for gpu in listed for mig in gpu.migs) == 1
    return device.startswith("GPU-") and sum(gpu.uuid.startswith(device) for gpu in listed) == 1


def usable_gpus(listed: Sequence[ListedGpu], cuda_visible_devices: str | None) -> tuple[str, ...]:
    """The GPU ids a process here may use: every device CUDA numbers, or, when CUDA_VISIBLE_DEVICES is set, its ids
    in its order (indexes or UUIDs, as written) up to the first that names no listed GPU, as CUDA reads it."""
    if cuda_visible_devices is None:
        return tuple(str(index) for index in range(cuda_devices(listed)))
    usable: list[str] = []
    for device in device_ids(cuda_visible_devices) or ():
        if device in usable or not names_gpu(device, listed):
            break
        usable.append(device)
    return tuple(usable)


def unknown_gpu_note(rank: int, cuda_visible_devices: str | None, listed: Sequence[ListedGpu]) -> str | None:
    """The line for a rank bound to a GPU (an index or a GPU UUID) that `nvidia-smi -L` does not list here."""
    bound = device_ids(cuda_visible_devices) or ()
    missing = [device for device in bound if (device.isdigit() or device.startswith(("GPU-", "MIG-")))
               and not names_gpu(device, listed)]
    if not missing:
        return None
    gpus = ", ".join(f"{gpu.index} {gpu.uuid}" for gpu in listed)
    has = f"{len(listed)} GPU{'' if len(listed) == 1 else 's'}: {gpus}" if listed else "no GPU"
    return (f"rank {rank} is bound to GPU {missing[0]} (CUDA_VISIBLE_DEVICES={cuda_visible_devices}) but this node "
            f"has {has} (nvidia-smi -L); CUDA skips it and every GPU named after it")
