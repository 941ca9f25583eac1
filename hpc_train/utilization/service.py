"""The job's data service sampled (docs/data_service.md): each of its processes, the dispatcher and every data worker,
samples its own CPU share every few seconds, a line each time in the run folder's
`utilization/data_service/NAME.jsonl`, which `report` draws (serviceplot.py).

The service's processes run as steps of their own, on any of the job's nodes, with no rank beside them to sample
them (a node's sampler knows its ranks alone): so each one samples itself, a thread reading its own CPU time.
The same settings as the ranks' (settings.py: HPC_TRAIN_SAMPLE_SECONDS, HPC_TRAIN_LEDGER=0 turns it off), from the
job's environment, which the service's steps inherit, as they inherit HPC_TRAIN_RUN_DIR. Sampling never ends a
server: a folder it cannot write to ends the sampling, in one line.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hpc_train.utilization import files
from hpc_train.utilization.procs import cores_of
from hpc_train.utilization.sampler import cpu_percent
from hpc_train.utilization.settings import Sampling
from hpc_train.version import PREFIX

ROLES = ("dispatcher", "worker")


def process_name(role: str, host: str, port: int) -> str:
    """The process's name in its samples and its file's: `worker-node1-16390` (pure); a worker started again at the
    same port goes on in the same file."""
    return f"{role}-{host}-{port}"


def service_row(now: float, name: str, role: str, host: str, port: int, cores: int, cpu: float) -> dict[str, Any]:
    """One sample's line: the process, the cores it may run on, its CPU use as a percent of them (pure)."""
    return {"t": round(now, 3), "name": name, "role": role, "host": host, "port": port, "cores": cores,
            "cpu": round(cpu, 1)}


class ServiceSampler:
    """The thread: start() once; it ends with the process (a daemon: the servers end with os._exit)."""

    def __init__(self, run_dir: Path, role: str, host: str, port: int, every: float,
                 clock: Callable[[], float] = time.time, cpu_time: Callable[[], float] = time.process_time) -> None:
        self.run_dir, self.role, self.host, self.port, self.every = Path(run_dir), role, host, port, every
        self.name = process_name(role, host, port)
        self._clock, self._cpu_time = clock, cpu_time
        self._before = (clock(), cpu_time())
        self._stopped = threading.Event()

    def start(self) -> ServiceSampler:
        threading.Thread(target=self._run, name="hpc-train service sampler", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopped.set()

    def sample(self) -> dict[str, Any] | None:
        """Read the process's CPU time once and append the line (None on the first look: nothing to compare)."""
        now = (self._clock(), self._cpu_time())
        cores = cores_of(os.getpid())
        cpu = cpu_percent(self._before, now, cores)
        self._before = now
        if cpu is None:
            return None
        row = service_row(now[0], self.name, self.role, self.host, self.port, cores, cpu)
        files.append_service_row(self.run_dir, self.name, row)
        return row

    def _run(self) -> None:
        while not self._stopped.wait(self.every):
            try:
                self.sample()
            except Exception as error:  # noqa: BLE001 - a lost folder, a full disk: sampling ends, the server serves
                print(f"{PREFIX}: warning: sampling the data service's {self.name} stopped ({error})",
                      file=sys.stderr, flush=True)
                return


def sample_service(environ: Mapping[str, str], role: str, host: str, port: int) -> ServiceSampler | None:
    """This server's sampler, started; None where nothing samples (no run folder, sampling off, a bad setting:
    one line, and the server serves unsampled)."""
    run_dir = environ.get("HPC_TRAIN_RUN_DIR")
    try:
        sampling = Sampling.from_environment(environ)
    except Exception as error:  # noqa: BLE001 - HpcTrainError: a bad setting costs the sampling, not the service
        print(f"{PREFIX}: warning: the data service's {role} is not sampled ({error})", file=sys.stderr, flush=True)
        return None
    if not run_dir or not sampling.on or not Path(run_dir).is_dir():
        return None
    return ServiceSampler(Path(run_dir), role, host, port, sampling.every).start()
