"""A heterogeneous step: one ``srun --het-group=0,1`` across the components of a heterogeneous job.

What Slurm 22.05 sets in every rank of such a step (checked on a local cluster, see docs/bootstrap.md):

- ``SLURM_STEP_NODELIST``, ``SLURM_STEP_TASKS_PER_NODE``, ``SLURM_STEP_NUM_TASKS``: the whole step, the
  components' nodes one after the other (component 0's first), their task counts likewise;
- ``SLURM_PROCID`` and ``SLURM_NODEID`` count across the components, component 0 first;
- ``SLURM_HET_SIZE`` and, per component N, ``SLURM_JOB_NODELIST_HET_GROUP_N`` and
  ``SLURM_NTASKS_HET_GROUP_N`` (the job's; inherited from the batch shell);
- nothing that names the rank's own component: it follows from where its rank falls.

The task distribution (``-m block|cyclic``) applies inside each component, so ranks are placed component by
component. A step that covers one component only (a plain ``srun`` in a heterogeneous job) is a plain step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hpc_train.bootstrap.nodelist import expand_nodelist, optional_count
from hpc_train.errors import SlurmEnvError

HET_SIZE = "SLURM_HET_SIZE"
MAX_COMPONENTS = 64  # far more than any job has; bounds a hand-set SLURM_HET_SIZE


def component_nodelist(index: int) -> str:
    return f"SLURM_JOB_NODELIST_HET_GROUP_{index}"


def component_node_counts(env: Mapping[str, str], step_nodes: Sequence[str]) -> tuple[int, ...]:
    """How many of the step's nodes each component it spans holds, in step order; () for a plain step.

    The step spans the components whose nodes it names; it is heterogeneous when it spans more than one.
    """
    size = optional_count(env, HET_SIZE)
    if size is None or size < 2:
        return ()
    components = [_component_nodes(env, index) for index in range(min(size, MAX_COMPONENTS))]
    step = set(step_nodes)
    spanned = [nodes for nodes in components if nodes and set(nodes) <= step]
    if len(spanned) < 2:
        return ()
    joined = tuple(node for nodes in spanned for node in nodes)
    if joined != tuple(step_nodes):
        raise SlurmEnvError("SLURM_STEP_NODELIST", ",".join(step_nodes),
                            f"is not its components' nodes one after the other ({','.join(joined)})",
                            "give each component nodes of its own (components that share a node cannot be told "
                            "apart); run one srun --het-group=0,1 across whole components")
    return tuple(len(nodes) for nodes in spanned)


def _component_nodes(env: Mapping[str, str], index: int) -> tuple[str, ...]:
    variable = component_nodelist(index)
    return expand_nodelist(variable, env[variable]) if env.get(variable, "").strip() else ()


def component_of_node(node_counts: Sequence[int], node_count: int) -> tuple[int, ...]:
    """The component of every node of the step (all 0 for a plain step)."""
    if not node_counts:
        return (0,) * node_count
    return tuple(component for component, count in enumerate(node_counts) for _ in range(count))
