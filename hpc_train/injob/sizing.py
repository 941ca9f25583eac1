"""The size of an attempt of a job asked for with a node range (`--nodes MIN-MAX`): read from Slurm's variables,
told to the ranks, and used to start the step on exactly the nodes the attempt got (pure)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from hpc_train.slurm.noderange import RANGE_VARIABLE, SIZE_VARIABLE
from hpc_train.spec.noderange import NodeRange, local_size, parse_nodes, size_words


def attempt_size(node_range: str | None, tasks_per_node: int, env: Mapping[str, str],
                 cpus: int | None = None) -> tuple[int, NodeRange] | None:
    """(the nodes this attempt runs on, the job's range); None for a job of a fixed size. Under Slurm, the nodes it
    was given (a heterogeneous job's: its last component's, the workers'); here, as many as this machine's CPUs
    hold (local_size)."""
    if not node_range:
        return None
    nodes = parse_nodes(node_range)
    components = env.get("SLURM_HET_SIZE", "")
    name = (f"SLURM_JOB_NUM_NODES_HET_GROUP_{int(components) - 1}" if components.isdigit() and int(components) > 1
            else "SLURM_JOB_NUM_NODES")
    given = env.get(name, "")
    if env.get("SLURM_JOB_ID") and given.isdigit():
        return int(given), nodes
    return local_size(nodes, tasks_per_node, cpus or os.cpu_count() or 1), nodes


def rank_environment(sized: tuple[int, NodeRange] | None) -> dict[str, str]:
    """What every rank is told of the range and its attempt's size (a user's command reads them)."""
    if sized is None:
        return {}
    size, nodes = sized
    return {RANGE_VARIABLE: str(nodes), SIZE_VARIABLE: str(size)}


def step_size_arguments(sized: tuple[int, NodeRange] | None, tasks_per_node: int) -> list[str]:
    """srun's sizing of a ranged job's step: every node the attempt got, `tasks_per_node` on each (the batch
    script asked for none, so that Slurm would give it as many nodes as are free)."""
    if sized is None:
        return []
    size = sized[0]
    return [f"--nodes={size}", f"--ntasks={size * tasks_per_node}", f"--ntasks-per-node={tasks_per_node}"]


def start_words(sized: tuple[int, NodeRange] | None) -> str:
    """The start line's words on the attempt's size: `, on 3 of 2-4 nodes`; '' for a fixed size."""
    return "" if sized is None else ", " + size_words(*sized)


def het_step_arguments(components: int, sized: tuple[int, NodeRange], tasks_per_node: int,
                       options: list[str]) -> list[str]:
    """srun's components of a ranged heterogeneous job's step, `:` between them (the command follows, for all):
    each component its own (--het-group=N and `options`), the last one, the workers', sized as a plain range's
    step (its allocation asks no tasks per node, so that Slurm gives it as many nodes as are free). A step of
    --het-group=0,1 would start one task on each of the workers' nodes."""
    parts = [[f"--het-group={index}", *options] for index in range(components - 1)]
    parts.append([f"--het-group={components - 1}", *step_size_arguments(sized, tasks_per_node), *options])
    return [word for index, part in enumerate(parts) for word in ([":"] if index else []) + part]


def with_step_tasks(env: Mapping[str, str], sized: tuple[int, NodeRange] | None,
                    tasks_per_node: int) -> Mapping[str, str]:
    """The batch shell's variables with a ranged heterogeneous job's workers' tasks as its step runs them (the
    allocation's SLURM_NTASKS_HET_GROUP_N counts one a node: it asked none), for the lines and records that say
    them; `env` itself where nothing differs. Never the step's environment (srun reads its own)."""
    components = env.get("SLURM_HET_SIZE", "")
    if sized is None or not components.isdigit() or int(components) < 2:
        return env
    return {**env, f"SLURM_NTASKS_HET_GROUP_{int(components) - 1}": str(sized[0] * tasks_per_node)}
