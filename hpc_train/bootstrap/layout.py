"""The pure core: a Slurm step's environment in, every rank's place in the cluster out.

`compute_layout` takes an environment mapping and returns a frozen `Layout`:
each rank's role, index, host, port and devices, and which rank is "me". Every
rank of a step computes the same cluster from its own copy of the variables, so
no rank has to talk to another to agree on it. ("Rank" is one Slurm process of
the step; TensorFlow calls it a task, and TF_CONFIG keeps TensorFlow's word.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from hpc_train.bootstrap.devices import Devices, assign_devices
from hpc_train.bootstrap.hetstep import component_of_node
from hpc_train.bootstrap.placement import place_components
from hpc_train.bootstrap.ports import HIGHEST_PORT, assign_ports
from hpc_train.bootstrap.roles import ROLE_ORDER, Strategy, Roles, assign_component_roles, assign_roles, uses_gpus
from hpc_train.bootstrap.slurm_env import SlurmStep, read_slurm_step
from hpc_train.errors import HpcTrainError, SlurmEnvError


@dataclass(frozen=True)
class BootstrapOptions:
    """How to turn a step into a cluster; validated on construction."""

    strategy: Strategy = Strategy.MULTIWORKER
    num_ps: int = 1
    port_base: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "strategy", Strategy.parse(self.strategy))
        if self.num_ps < 1:
            raise HpcTrainError(f"--num-ps {self.num_ps}: a parameter-server job needs at least 1 ps")
        if self.port_base is not None and not 1024 <= self.port_base <= HIGHEST_PORT:
            raise HpcTrainError(f"--port-base {self.port_base} is outside 1024-{HIGHEST_PORT}; "
                                "pick an unprivileged port such as 20000")


class Rank(NamedTuple):
    """One rank's place in the cluster."""

    rank: int
    role: str  # "chief", "ps" or "worker"
    index: int  # the rank's index among the ranks of its role (TF_CONFIG's task index)
    host: str
    port: int
    node_index: int
    local_index: int
    devices: Devices  # CUDA_VISIBLE_DEVICES to export; None: leave Slurm's

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Layout:
    """Every rank of a step, and which of them this process is.

    Kept as one column per field (a step may have 32,768 ranks, and a rank
    needs only the cluster spec and its own row); `ranks` builds the rows.
    """

    strategy: Strategy
    rank: int
    roles: tuple[str, ...]
    indexes: tuple[int, ...]
    hosts: tuple[str, ...]
    ports: tuple[int, ...]
    node_of_rank: tuple[int, ...]
    local_of_rank: tuple[int, ...]
    devices: tuple[Devices, ...]
    port_rule: str
    notes: tuple[str, ...] = field(default=())
    # The heterogeneous job component of every rank (all 0 in a plain step); () when not computed.
    components: tuple[int, ...] = field(default=())

    @property
    def heterogeneous(self) -> bool:
        return any(self.components)

    def rank_at(self, rank: int) -> Rank:
        return Rank(rank, self.roles[rank], self.indexes[rank], self.hosts[rank], self.ports[rank],
                    self.node_of_rank[rank], self.local_of_rank[rank], self.devices[rank])

    @property
    def me(self) -> Rank:
        return self.rank_at(self.rank)

    @cached_property
    def ranks(self) -> tuple[Rank, ...]:
        return tuple(map(Rank, range(len(self.roles)), self.roles, self.indexes, self.hosts, self.ports,
                         self.node_of_rank, self.local_of_rank, self.devices))

    @property
    def tasks(self) -> tuple[Rank, ...]:
        """The old name of `ranks`, kept for scripts written against it."""
        return self.ranks

    def task(self, rank: int) -> Rank:
        """The old name of `rank_at`, kept for scripts written against it."""
        return self.rank_at(rank)

    def cluster(self) -> dict[str, list[str]]:
        """The cluster spec: role -> addresses ordered by index (chief, ps, worker)."""
        addresses = list(map("{}:{}".format, self.hosts, self.ports))
        # Ranks of one role are consecutive and in index order (see roles.py).
        by_role = {role: [address for address, r in zip(addresses, self.roles) if r == role] for role in ROLE_ORDER}
        return {role: members for role, members in by_role.items() if members}


def compute_layout(env: Mapping[str, str], options: BootstrapOptions = BootstrapOptions()) -> Layout:
    """Compute the whole step's layout from one rank's environment."""
    step = read_slurm_step(env)
    node_of_rank, local_of_rank = place_components(step.tasks_per_node, step.distribution, step.component_nodes)
    _check_own_place(step, node_of_rank[step.rank], local_of_rank[step.rank])
    roles, role_notes = _roles(step, options)
    ports = assign_ports(local_of_rank, job_id=step.job_id, reserved=step.reserved_ports,
                         port_base=options.port_base if options.port_base is not None else step.port_base,
                         above=step.service_ports)
    computing = {role: uses_gpus(role, options.strategy) for role in ROLE_ORDER}
    devices, device_notes = assign_devices(step.nodes, node_of_rank, [computing[role] for role in roles.types],
                                           step.gpus)
    hosts = tuple(step.nodes[node] for node in node_of_rank)
    notes = ((step.note,) if step.note else ()) + role_notes + device_notes
    component_of = component_of_node(step.component_nodes, len(step.nodes))
    return Layout(options.strategy, step.rank, roles.types, roles.indexes, hosts, ports.ports,
                  node_of_rank, local_of_rank, devices, ports.rule, notes,
                  tuple(component_of[node] for node in node_of_rank))


def _roles(step: SlurmStep, options: BootstrapOptions) -> tuple[Roles, tuple[str, ...]]:
    """Roles by rank in a plain step, by component in a heterogeneous one (saying so when --num-ps differs)."""
    if not step.component_nodes:
        return assign_roles(step.num_tasks, options.strategy, options.num_ps), ()
    per_component = step.tasks_per_component
    roles = assign_component_roles(per_component, options.strategy)
    num_ps = per_component[0] - 1
    if options.strategy is Strategy.PARAMETER_SERVER and num_ps != options.num_ps:
        return roles, (f"heterogeneous step: component 0 runs the chief and {num_ps} ps (--num-ps "
                       f"{options.num_ps} does not apply)",)
    return roles, ()


def _check_own_place(step: SlurmStep, node: int, local: int) -> None:
    """Slurm's own word on where this rank runs must match the computed placement.

    A mismatch means a layout hpc-train does not model (e.g. an arbitrary or plane
    distribution that SLURM_DISTRIBUTION did not report): refuse it, since a wrong
    cluster spec would hang every rank.
    """
    placed = f"a {step.distribution.value} placement puts rank {step.rank} on {step.nodes[node]}"
    fix = "start tasks with srun -m block or -m cyclic"
    if step.node_id is not None and step.node_id != node:
        raise SlurmEnvError("SLURM_NODEID", str(step.node_id), f"but {placed} (node {node})", fix)
    if step.node_name is not None and step.node_name != step.nodes[node]:
        raise SlurmEnvError("SLURMD_NODENAME", step.node_name, f"but {placed}", fix)
    if step.local_id is not None and step.local_id != local:
        raise SlurmEnvError("SLURM_LOCALID", str(step.local_id), f"but {placed} as its task {local}", fix)
