"""Where the data service listens (pure): the top ports of the job's port window, above its ranks' ports.

The ranks take the window's first ports (bootstrap/ports.py: offset = rank), so the dispatcher takes the window's
last port and worker i the one below the dispatcher's minus i. The window grows to hold them (bootstrap.ports:
`above`, the service's processes), as the ranks' and the site kit's windows do: a 16-rank job with a dispatcher and
two workers has a window of 32. Being in the window, the service's ports are the job's ports: the site kit's
firewall (hpc_train/site) lets them through from the job's own nodes alone.
"""

from __future__ import annotations

from typing import NamedTuple

from hpc_train.bootstrap.ports import HIGHEST_PORT, base_window, derived_window, rank_offsets
from hpc_train.errors import HpcTrainError


class ServicePorts(NamedTuple):
    dispatcher: int
    workers: tuple[int, ...]


def window(job_id: int | None, tasks: int, tasks_per_node: int, port_base: int | None = None,
           above: int = 0) -> range:
    """The job's port window, as the ranks' ports are taken from it, with `above` ports for the service at its top:
    from `port_base` (HPC_TRAIN_PORT_BASE, a packed trial's), else derived from the job id
    (bootstrap.ports.derived_window)."""
    if port_base is not None:
        ports = base_window(port_base, tasks, above)
        if ports.stop - 1 > HIGHEST_PORT:
            raise HpcTrainError(f"port base {port_base}: the window of {tasks} rank(s) and {above} data service "
                                f"port(s) ends past port {HIGHEST_PORT}; pass a lower --port-base")
        return ports
    if job_id is None:
        raise HpcTrainError("the data service takes its ports from the job's window, derived from SLURM_JOB_ID: "
                            "run it inside a Slurm job (or submit --local)")
    return derived_window(job_id, tasks, tasks_per_node, above)


def service_ports(ports: range, tasks: int, workers: int, tasks_per_node: int | None = None) -> ServicePorts:
    """The dispatcher's and each worker's port, at the top of `ports`; one line when the ranks' offsets (one per
    rank, or per task of a node past 256 ranks) leave no room."""
    offsets = rank_offsets(tasks, tasks if tasks_per_node is None else tasks_per_node)
    free = len(ports) - offsets
    if free < 1 + workers:
        raise HpcTrainError(f"--data-workers {workers}: the job's port window {ports.start}-{ports.stop - 1} holds "
                            f"{len(ports)} ports, {offsets} of them its ranks', which leaves {max(free, 0)} for a "
                            f"dispatcher and {workers} worker(s); ask for at most {max(free - 1, 0)} data workers")
    last = ports.stop - 1
    return ServicePorts(last, tuple(last - 1 - index for index in range(workers)))
