"""What a Slurm step tells one task about itself and its peers, read from a mapping.

Inside a step (``srun``) the ``SLURM_STEP_*`` variables describe the step. In a
plain batch or ``salloc`` shell there is no step; the job's variables describe
the allocation instead, and the step read from them says so in `note`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from hpc_train.bootstrap.devices import NodeGpus
from hpc_train.bootstrap.hetstep import component_node_counts
from hpc_train.bootstrap.nodelist import expand_nodelist, expand_port_list, expand_tasks_per_node, optional_count
from hpc_train.bootstrap.placement import Distribution, parse_distribution
from hpc_train.errors import SlurmEnvError

UNDER_SRUN = "run the command under srun so that Slurm starts one task per rank"


class StepVariables(NamedTuple):
    """Where one source keeps the step's shape."""

    nodelist: str
    num_tasks: str
    tasks_per_node: str
    num_nodes: str


STEP = StepVariables("SLURM_STEP_NODELIST", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_TASKS_PER_NODE",
                     "SLURM_STEP_NUM_NODES")
# A packed trial's first port, which its scheduler sets (ports.trial_port_base).
PORT_BASE = "HPC_TRAIN_PORT_BASE"
# The ports the job's window holds above the ranks' for its services (the job body's data service sets it in the
# step: ports.derived_window grows by them, as the body's and the site kit's windows do).
SERVICE_PORTS = "HPC_TRAIN_SERVICE_PORTS"
JOB = StepVariables("SLURM_JOB_NODELIST", "SLURM_NTASKS", "SLURM_TASKS_PER_NODE", "SLURM_JOB_NUM_NODES")


@dataclass(frozen=True)
class SlurmStep:
    """One task's view of its step: the step's shape, its own place, its node's GPUs."""

    nodes: tuple[str, ...]
    tasks_per_node: tuple[int, ...]
    rank: int
    distribution: Distribution
    job_id: int | None
    reserved_ports: tuple[int, ...]
    gpus: NodeGpus
    # Where Slurm says this task is; checked against the placement when given.
    node_id: int | None = None
    local_id: int | None = None
    node_name: str | None = None
    note: str | None = None
    # A heterogeneous step: how many of `nodes` each component holds, in order (hetstep.py); () for a plain one.
    component_nodes: tuple[int, ...] = ()
    # A packed trial's ports (HPC_TRAIN_PORT_BASE, set by its scheduler: apart from its neighbours'); None: the rule.
    port_base: int | None = None
    # The ports of the job's services at the top of its window (SERVICE_PORTS); 0: none.
    service_ports: int = 0

    @property
    def num_tasks(self) -> int:
        return sum(self.tasks_per_node)

    @property
    def tasks_per_component(self) -> tuple[int, ...]:
        """Each component's task count, in order; (num_tasks,) for a plain step."""
        counts, first = [], 0
        for size in self.component_nodes or (len(self.nodes),):
            counts.append(sum(self.tasks_per_node[first:first + size]))
            first += size
        return tuple(counts)


def read_slurm_step(env: Mapping[str, str]) -> SlurmStep:
    """Read a task's step from environment variables; raise `SlurmEnvError` on bad input."""
    source, note = _choose_source(env)
    nodes = expand_nodelist(source.nodelist, env[source.nodelist])
    tasks_per_node = _tasks_per_node(env, source, nodes)
    num_tasks = sum(tasks_per_node)
    _check_count(env, source.num_tasks, num_tasks, f"{source.tasks_per_node} adds up to")
    _check_count(env, source.num_nodes, len(nodes), f"{source.nodelist} names")
    return SlurmStep(
        nodes=nodes,
        tasks_per_node=tasks_per_node,
        rank=_rank(env, num_tasks, in_step=source is STEP),
        distribution=parse_distribution("SLURM_DISTRIBUTION", env.get("SLURM_DISTRIBUTION")),
        job_id=optional_count(env, "SLURM_JOB_ID"),
        reserved_ports=_reserved_ports(env),
        gpus=NodeGpus.from_environment(env),
        node_id=optional_count(env, "SLURM_NODEID"),
        local_id=optional_count(env, "SLURM_LOCALID"),
        node_name=env.get("SLURMD_NODENAME"),
        note=note,
        component_nodes=component_node_counts(env, nodes) if source is STEP else (),
        port_base=optional_count(env, PORT_BASE),
        service_ports=optional_count(env, SERVICE_PORTS) or 0,
    )



def _choose_source(env: Mapping[str, str]) -> tuple[StepVariables, str | None]:
    if STEP.nodelist in env:
        return STEP, None
    if JOB.nodelist in env:
        return JOB, (f"not inside a job step ({STEP.nodelist} is not set): using the job's allocation "
                     f"({JOB.nodelist}); {UNDER_SRUN}")
    raise SlurmEnvError(STEP.nodelist, None, "no Slurm variables found",
                        "not inside a Slurm step? run it under srun")


def _tasks_per_node(env: Mapping[str, str], source: StepVariables, nodes: tuple[str, ...]) -> tuple[int, ...]:
    if source.tasks_per_node not in env:
        raise SlurmEnvError(source.tasks_per_node, None, f"it says how many tasks run on each node of {source.nodelist}",
                            UNDER_SRUN)
    counts = expand_tasks_per_node(source.tasks_per_node, env[source.tasks_per_node])
    if len(counts) != len(nodes):
        raise SlurmEnvError(source.tasks_per_node, env[source.tasks_per_node],
                            f"gives counts for {len(counts)} nodes but {source.nodelist}="
                            f"{env[source.nodelist]!r} names {len(nodes)}",
                            "both must come from the same step; are they hand-set?")
    return counts


def _check_count(env: Mapping[str, str], variable: str, expected: int, what: str) -> None:
    """If Slurm also gave a count, it must agree with the one derived from the lists."""
    given = optional_count(env, variable)
    if given is not None and given != expected:
        raise SlurmEnvError(variable, env[variable], f"but {what} {expected}",
                            "both must come from the same step; are they hand-set?")


def _rank(env: Mapping[str, str], num_tasks: int, in_step: bool) -> int:
    rank = optional_count(env, "SLURM_PROCID")
    if rank is None:
        if in_step:
            raise SlurmEnvError("SLURM_PROCID", None, "every task of a step has a rank", UNDER_SRUN)
        return 0  # a batch or salloc shell is the allocation's first task
    if rank >= num_tasks:
        raise SlurmEnvError("SLURM_PROCID", env["SLURM_PROCID"],
                            f"out of range for a step of {num_tasks} tasks (0-{num_tasks - 1})", UNDER_SRUN)
    return rank


def _reserved_ports(env: Mapping[str, str]) -> tuple[int, ...]:
    value = env.get("SLURM_STEP_RESV_PORTS", "")
    return expand_port_list("SLURM_STEP_RESV_PORTS", value) if value.strip() else ()
