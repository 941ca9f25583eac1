"""Rank to role: who is chief, parameter server or worker.

``multiworker`` (MultiWorkerMirroredStrategy)
    Every rank is a ``worker`` and its index is its rank. TensorFlow makes
    worker 0 the chief (it writes checkpoints and logs).

``parameter_server`` (ParameterServerStrategy) with K parameter servers
    rank 0           -> ``chief`` 0   (the coordinator that runs the training loop)
    ranks 1 .. K     -> ``ps`` 0 .. K-1
    ranks K+1 .. N-1 -> ``worker`` 0 .. N-K-2
    so at least K + 2 tasks are needed. Only workers compute: the chief and the
    parameter servers are given no GPU.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from hpc_train.errors import HpcTrainError

CHIEF, PS, WORKER = "chief", "ps", "worker"

# The order in which task types appear in a cluster spec and in tables.
ROLE_ORDER = (CHIEF, PS, WORKER)


class Strategy(enum.Enum):
    MULTIWORKER = "multiworker"
    PARAMETER_SERVER = "parameter_server"

    @classmethod
    def parse(cls, value: "str | Strategy") -> "Strategy":
        if isinstance(value, Strategy):
            return value
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(s.value for s in cls)
            raise HpcTrainError(f"unknown strategy {value!r}; choose one of: {choices}") from None


class Roles(NamedTuple):
    """Every rank's role type and its index among tasks of that type."""

    types: tuple[str, ...]
    indexes: tuple[int, ...]


def assign_roles(num_tasks: int, strategy: Strategy, num_ps: int) -> Roles:
    """The roles of all ranks (see the module docstring for the mapping)."""
    if strategy is Strategy.MULTIWORKER:
        return Roles((WORKER,) * num_tasks, tuple(range(num_tasks)))
    if num_ps > num_tasks - 2:
        raise HpcTrainError(
            f"--num-ps {num_ps} needs at least {num_ps + 2} tasks (1 chief + {num_ps} ps + 1 worker) "
            f"but the step has {num_tasks}; lower --num-ps or start more tasks (srun -n)")
    num_workers = num_tasks - 1 - num_ps
    return Roles((CHIEF,) + (PS,) * num_ps + (WORKER,) * num_workers,
                 (0,) + tuple(range(num_ps)) + tuple(range(num_workers)))


def assign_component_roles(tasks_per_component: tuple[int, ...], strategy: Strategy) -> Roles:
    """The roles of a heterogeneous step's ranks: the components decide, not --num-ps.

    parameter_server: component 0 holds the chief (its first rank) and the ps (the rest), every later component
    workers; multiworker: every rank a worker, as in a plain step.
    """
    num_tasks = sum(tasks_per_component)
    if strategy is Strategy.MULTIWORKER:
        return assign_roles(num_tasks, strategy, 1)
    first = tasks_per_component[0]
    if first < 2:
        raise HpcTrainError(f"component 0 of the heterogeneous step runs {first} task(s) but holds the chief and "
                            "the ps: give it 1 + K tasks for K ps (e.g. #SBATCH --ntasks=2 in its block)")
    return assign_roles(num_tasks, strategy, first - 1)


def uses_gpus(role: str, strategy: Strategy) -> bool:
    """Whether tasks of this role compute and so get a share of the node's GPUs."""
    return role == WORKER or strategy is Strategy.MULTIWORKER
