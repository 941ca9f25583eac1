"""Ports: distinct for every task on a host, and apart from other jobs' ports.

The rule, in order of precedence:

1. ``--port-base B`` (or ``HPC_TRAIN_PORT_BASE``, which a packed sweep's scheduler sets for each trial:
   ``trial_port_base``, a window per share of the allocation): task ports are ``B + offset``.
2. ``srun --resv-ports`` (``SLURM_STEP_RESV_PORTS``): Slurm reserved these ports
   for this step on every node; task ports are ``reserved[offset]``.
3. Otherwise a window derived from ``SLURM_JOB_ID`` inside ports 16384-32767,
   below Linux's default ephemeral range (32768-60999), so outgoing connections
   never take them. The window size W is the smallest power of two, at least 8,
   that holds the offsets; the window starts at
   ``16384 + (job_id mod (16384 / W)) * W``. Jobs with consecutive ids therefore
   get disjoint windows, and two jobs sharing a node meet only if their ids
   differ by a multiple of 16384 / W (2,048 for jobs of up to 8 tasks).

A job that runs services beside its ranks (the job body's tf.data service: a dispatcher and its data workers) takes
their ports from the top of the same window, which then holds the ranks' offsets **and** those ports: W is the
smallest power of two, at least 8, that holds both (a 16-rank job with a dispatcher and two workers: 32). Everyone
who computes the window must count them alike: the job body (which starts the services), the ranks (told by
``HPC_TRAIN_SERVICE_PORTS``, bootstrap/slurm_env.py) and the site kit's firewall (told by the job's Slurm comment,
``service_comment``, which the rendered script carries). A service on a partition of its own (a heterogeneous job's
last component) counts in the window the same way; its component's tasks are not ranks, so the comment names that
component too, for the site kit to leave its tasks out of the ranks' count.

The offset of a task is its **rank** whenever the window can hold every task of
the step, so ports differ across the whole job; that keeps a one-machine test
cluster (several slurmd "nodes" sharing one network stack) safe. (A local cluster
with separate hosts, `hpc-train cluster up --separate-hosts`, gives every node its
own stack, as a real cluster does: there distinct ports are not needed, and still
correct.) Only when it cannot (steps of more than 256 tasks for derived windows,
or more tasks than reserved ports) the offset is the task's **local index** on
its node, which is still distinct on every host.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from hpc_train.errors import HpcTrainError, SlurmEnvError

DERIVED_RANGE_START = 16384
DERIVED_RANGE_SIZE = 16384
MIN_WINDOW = 8
# Derived windows stay small so that jobs sharing a node rarely meet.
MAX_JOB_WIDE_WINDOW = 256
HIGHEST_PORT = 65535
# The job's Slurm comment's word that says how many ports its window holds above the ranks' (the site kit reads it
# with `scontrol show job`: the prolog has no other way to learn what the job body will start).
COMMENT_WORD = "hpc-train-service-ports"
# ... and, for a service on a partition of its own, which component of the heterogeneous job holds it.
COMPONENT_WORD = "hpc-train-service-component"
_COMMENT = re.compile(rf"(?:^|[\s,;]){COMMENT_WORD}=(\d+)(?:$|[\s,;])")
_COMPONENT = re.compile(rf"(?:^|[\s,;]){COMPONENT_WORD}=(\d+)(?:$|[\s,;])")


class PortPlan(NamedTuple):
    ports: tuple[int, ...]
    rule: str  # one line for people: where the ports came from


def assign_ports(local_index: Sequence[int], *, job_id: int | None,
                 reserved: Sequence[int] = (), port_base: int | None = None, above: int = 0) -> PortPlan:
    """Give every rank a port by the module's rule; `local_index` is per rank; `above`: the ports the job's window
    holds above the ranks' for its services (which moves a derived window: it grows)."""
    if port_base is not None:
        return _from_base(local_index, port_base)
    if reserved:
        return _from_reserved(local_index, reserved)
    if job_id is None:
        raise SlurmEnvError("SLURM_JOB_ID", None, "hpc-train derives the job's ports from it",
                            "run the command inside a Slurm job, or pass --port-base")
    return _from_job_id(local_index, job_id, above)


def _offsets(local_index: Sequence[int], capacity: int) -> Sequence[int] | None:
    """Ranks if `capacity` ports hold the whole step, else local indexes, else None."""
    if len(local_index) <= capacity:
        return range(len(local_index))
    if max(local_index) < capacity:
        return local_index
    return None


def _from_base(local_index: Sequence[int], port_base: int) -> PortPlan:
    offsets = _offsets(local_index, HIGHEST_PORT + 1 - port_base)
    if offsets is None:
        raise HpcTrainError(f"--port-base {port_base} leaves no room for {max(local_index) + 1} tasks "
                            f"on one node below port {HIGHEST_PORT}; pass a lower --port-base")
    return PortPlan(tuple(port_base + offset for offset in offsets), f"--port-base {port_base}")


def _from_reserved(local_index: Sequence[int], reserved: Sequence[int]) -> PortPlan:
    offsets = _offsets(local_index, len(reserved))
    if offsets is None:
        per_node = max(local_index) + 1
        raise SlurmEnvError("SLURM_STEP_RESV_PORTS", ",".join(map(str, reserved)),
                            f"{len(reserved)} reserved ports for {per_node} tasks on one node",
                            f"ask srun --resv-ports={per_node}, or leave --resv-ports out")
    return PortPlan(tuple(reserved[offset] for offset in offsets), "SLURM_STEP_RESV_PORTS")


def rank_offsets(tasks: int, tasks_per_node: int) -> int:
    """How many offsets a derived window gives the ranks (pure): one per rank of the job, or, past
    MAX_JOB_WIDE_WINDOW ranks, one per task of the fullest node."""
    return tasks if tasks <= MAX_JOB_WIDE_WINDOW else tasks_per_node


def window_size(offsets: int, above: int = 0) -> int:
    """A window's size (pure): the smallest power of two, at least MIN_WINDOW, that holds the ranks' `offsets` and
    the `above` ports of the job's services."""
    return max(MIN_WINDOW, _next_power_of_two(offsets + max(0, above)))


def derived_window(job_id: int, tasks: int, tasks_per_node: int, above: int = 0) -> range:
    """The ports a job's step of `tasks` tasks (at most `tasks_per_node` on one node) takes by the job-id rule,
    with `above` more ports for the job's services at its top (pure): the bootstrap's ports, the job body's data
    service and the site kit's firewall (hpc_train/site) all ask this one function."""
    needed = rank_offsets(tasks, tasks_per_node)
    window = window_size(needed, above)
    if window > DERIVED_RANGE_SIZE:
        raise HpcTrainError(f"{needed} tasks on one node and {above} service port(s) need more than "
                            f"{DERIVED_RANGE_SIZE} ports; pass --port-base or use srun --resv-ports")
    start = DERIVED_RANGE_START + (job_id % (DERIVED_RANGE_SIZE // window)) * window
    return range(start, start + window)


def base_window(port_base: int, tasks: int, above: int = 0) -> range:
    """The window from `port_base` (--port-base, a packed trial's HPC_TRAIN_PORT_BASE): the ranks' offsets and the
    `above` service ports from the base up (pure)."""
    return range(port_base, port_base + window_size(tasks, above))


def service_comment(above: int, component: int | None = None) -> str:
    """The job's Slurm comment's word for `above` service ports and, when the service has a component of its own
    in a heterogeneous job, its index (the site kit's firewall reads them back). One word, joined by a comma:
    `scontrol show job -o` ends the comment at its first space."""
    return f"{COMMENT_WORD}={above}" + ("" if component is None else f",{COMPONENT_WORD}={component}")


def ports_above(comment: str | None) -> int:
    """The service ports a job's Slurm comment says its window holds above the ranks' (0 when it says none)."""
    found = _COMMENT.search(comment or "")
    return int(found.group(1)) if found else 0


def service_component(comment: str | None) -> int | None:
    """The heterogeneous job's component that a job's Slurm comment says holds its service, whose tasks are not
    ranks; None when it says none (the service runs beside the ranks, or there is none)."""
    found = _COMPONENT.search(comment or "")
    return int(found.group(1)) if found else None


def _from_job_id(local_index: Sequence[int], job_id: int, above: int = 0) -> PortPlan:
    window = derived_window(job_id, len(local_index), max(local_index) + 1, above)
    offsets = range(len(local_index)) if len(local_index) <= MAX_JOB_WIDE_WINDOW else local_index
    return PortPlan(tuple(window.start + offset for offset in offsets),
                    f"SLURM_JOB_ID={job_id}: window {window.start}-{window.stop - 1}")


def trial_port_base(job_id: int, slot: int, slots: int, tasks: int) -> int:
    """A packed trial's first port (HPC_TRAIN_PORT_BASE): its job's windows, one per slot of the allocation, each
    holding the trial's `tasks`, so that trials running side by side never meet, nor the next job's (pure)."""
    window = max(MIN_WINDOW, _next_power_of_two(tasks))
    per_job = _next_power_of_two(max(1, slots))
    windows = DERIVED_RANGE_SIZE // window
    return DERIVED_RANGE_START + ((job_id * per_job + slot) % windows) * window


def _next_power_of_two(value: int) -> int:
    return 1 << max(0, value - 1).bit_length()
