"""The node's sampler: a thread of the node's first rank that samples, every few seconds, each GPU bound to the
node's ranks (NVML) and each rank's CPU share and resident memory, a line each time in `utilization/NODE.jsonl`.

`join_node(environ)` is the one call a rank makes once placed (the trainer's and a user's command's supervisor):
it registers the rank (its pid, its GPUs as CUDA_VISIBLE_DEVICES binds them) and, in the node's first rank
(SLURM_LOCALID 0), starts the sampler, which reads the node's registrations at each sample. A rank's CPU share is
of the cores it may run on (Slurm's binding). Building a sample from what was read is pure (`sample_row`).
Sampling never ends a rank: a run folder it cannot write to is one warning line, and no sampling.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hpc_train.bootstrap.devices import device_ids
from hpc_train.utilization import files
from hpc_train.utilization.files import RankEntry
from hpc_train.utilization.nvml import GpuReading, Nvml, open_nvml
from hpc_train.utilization.procs import Process, cores_of, process_table, tree_usage
from hpc_train.utilization.settings import Sampling
from hpc_train.version import PREFIX

def bound_gpus(cuda_visible_devices: str | None) -> tuple[str, ...] | None:
    """The GPU ids a rank is bound to; None: unset, every GPU of the node (pure; the bootstrap's reading)."""
    return device_ids(cuda_visible_devices)


def node_name(environ: Mapping[str, str]) -> str:
    return environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def step_key(environ: Mapping[str, str]) -> str:
    """The attempt's step, as its ranks all see it: a requeued job's ranks are another attempt's (pure)."""
    return ".".join(environ.get(name, "") for name in ("SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_RESTART_COUNT"))


def gpu_ranks(entries: Sequence[RankEntry], every_gpu: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """Each GPU of the job on this node and the ranks bound to it, in the order the ranks name them; then the GPUs
    Slurm gave the step that no rank is bound to (a share left over: no rank) (pure)."""
    bound: dict[str, list[int]] = {}
    for entry in entries:
        for gpu in every_gpu if entry.gpus is None else entry.gpus:
            bound.setdefault(gpu, []).append(entry.rank)
    for entry in entries:
        for gpu in entry.allocated:
            bound.setdefault(gpu, [])
    return {gpu: tuple(ranks) for gpu, ranks in bound.items()}


def sample_row(now: float, node: str, sampling: Sampling, gpus: Mapping[str, tuple[int, ...]],
               readings: Mapping[str, GpuReading | None], ranks: Sequence[tuple[RankEntry, int, float | None, int]],
               ) -> dict[str, Any]:
    """One sample's line: each GPU read (one NVML could not read is left out) with its ranks, and each rank's
    (entry, cores, CPU percent of its cores or None on the first sample, resident bytes) (pure)."""
    return {"t": round(now, 3), "node": node, "every": sampling.every, "idle_below": sampling.idle_below,
            "idle_after": sampling.idle_after,
            "gpus": [{"gpu": gpu, "ranks": list(bound), "util": reading.utilization, "mem": reading.memory_used,
                      "mem_total": reading.memory_total}
                     for gpu, bound in gpus.items() if (reading := readings.get(gpu)) is not None],
            "ranks": [{"rank": entry.rank, "cores": cores, "cpu": None if cpu is None else round(cpu, 1),
                       "rss": resident} for entry, cores, cpu, resident in ranks]}


def cpu_percent(before: tuple[float, float] | None, now: tuple[float, float], cores: int) -> float | None:
    """CPU use between two readings of (wall seconds, CPU seconds), as a percent of `cores` (pure)."""
    if before is None or now[0] <= before[0]:
        return None
    return max(0.0, 100.0 * (now[1] - before[1]) / ((now[0] - before[0]) * max(1, cores)))


class NodeSampler:
    """The thread: start() once, stop() (or the process's end: it is a daemon) ends it."""

    def __init__(self, run_dir: Path, node: str, step: str, sampling: Sampling,
                 nvml: Callable[[], Nvml | None] = open_nvml, clock: Callable[[], float] = time.time,
                 table: Callable[[], Mapping[int, Process]] = process_table) -> None:
        self.run_dir, self.node, self.step, self.sampling = Path(run_dir), node, step, sampling
        self._open_nvml, self._clock, self._table = nvml, clock, table
        self._nvml: Nvml | None = None
        self._before: dict[int, tuple[float, float]] = {}  # pid: (wall, CPU seconds) at the last sample
        self._stopped = threading.Event()

    def start(self) -> "NodeSampler":
        threading.Thread(target=self._run, name="hpc-train sampler", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopped.set()

    def sample(self) -> dict[str, Any]:
        """Read everything once and append the line; return it."""
        now = self._clock()
        entries = files.node_ranks(self.run_dir, self.node, self.step)
        table = self._table()
        entries = [entry for entry in entries if entry.pid in table]  # a rank that ended is no longer sampled
        every_gpu = self._nvml.indexes() if self._nvml is not None else ()
        bound = gpu_ranks(entries, every_gpu) if self._nvml is not None else {}
        readings = {gpu: self._nvml.read(gpu) for gpu in bound} if self._nvml is not None else {}
        ranks = []
        for entry in entries:
            cpu_seconds, resident = tree_usage(entry.pid, table) or (0.0, 0)
            cores = cores_of(entry.pid)
            ranks.append((entry, cores, cpu_percent(self._before.get(entry.pid), (now, cpu_seconds), cores),
                          resident))
            self._before[entry.pid] = (now, cpu_seconds)
        row = sample_row(now, self.node, self.sampling, bound, readings, ranks)
        files.append_row(self.run_dir, self.node, row)
        return row

    def _run(self) -> None:
        self._nvml = self._open_nvml()
        try:
            while True:
                try:
                    self.sample()
                except Exception as error:  # noqa: BLE001 - a full disk, a lost file system, a bug: sampling
                    # ends, in one line; the rank goes on
                    if not self.run_dir.is_dir():
                        return  # the run folder was removed: nothing left to sample for
                    print(f"{PREFIX}: warning: utilization sampling on {self.node} stopped ({error})",
                          file=sys.stderr, flush=True)
                    return
                if self._stopped.wait(self.sampling.every):
                    return
        finally:
            if self._nvml is not None:
                self._nvml.close()


def join_node(environ: Mapping[str, str], pid: int, nvml: Callable[[], Nvml | None] = open_nvml,
              slurms: str | None = None) -> NodeSampler | None:
    """Register this rank (process `pid`, bound as `environ` says) with its node's sampler, and start the sampler
    when this is the node's first rank; None where nothing samples here (no run folder, sampling off, not the first
    rank). `slurms`: CUDA_VISIBLE_DEVICES as Slurm set it, before the bootstrap cut this rank's share."""
    run_dir = environ.get("HPC_TRAIN_RUN_DIR")
    sampling = Sampling.from_environment(environ)  # a bad setting: one line, the rank refuses to start
    if not run_dir or not sampling.on:
        return None
    node, step = node_name(environ), step_key(environ)
    entry = RankEntry(int(environ.get("SLURM_PROCID", "0") or 0), pid,
                      bound_gpus(environ.get("CUDA_VISIBLE_DEVICES")), step, bound_gpus(slurms) or ())
    try:
        files.register_rank(Path(run_dir), node, entry)
    except OSError as error:
        print(f"{PREFIX}: warning: no utilization sampling for rank {entry.rank} ({error})", file=sys.stderr,
              flush=True)
        return None
    if environ.get("SLURM_LOCALID", "0") != "0":
        return None
    return NodeSampler(Path(run_dir), node, step, sampling, nvml).start()
