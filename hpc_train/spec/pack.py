"""A packed sweep's trial share (`submit --pack`): how much of the one allocation each trial gets, checked against
the job's group before anything is queued.

A packed sweep is ONE job of N nodes whose body runs the sweep's trials as separate srun steps, each on its own
share: `--trial-gpus K` (K GPUs of one node; 1 by default where the nodes have GPUs), `--trial-nodes M` (M whole
nodes, a multi-node trial), or on CPU-only nodes `--trial-cpus C` (one task of C CPUs, `--ntasks-per-node` of them
on a node). Every refusal is one line naming the problem and the fix (pure).
"""

from __future__ import annotations

from dataclasses import dataclass

from hpc_train.errors import HpcTrainError


class PackError(HpcTrainError):
    """A trial share that cannot fit the job."""


@dataclass(frozen=True)
class Pack:
    """What each packed trial gets: K GPUs on one node, M whole nodes, or (CPU-only nodes) one task of C CPUs.
    None: not said (the defaults: one GPU where there are GPUs, else one task of the job's CPUs per task)."""

    trial_gpus: int | None = None
    trial_nodes: int | None = None
    trial_cpus: int | None = None

    def __post_init__(self) -> None:
        for option, value in (("--trial-gpus", self.trial_gpus), ("--trial-nodes", self.trial_nodes),
                              ("--trial-cpus", self.trial_cpus)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise PackError(f"{option} {value!r}: must be a whole number of 1 or more")
        if self.trial_gpus is not None and self.trial_nodes is not None:
            raise PackError("--trial-gpus with --trial-nodes: a trial gets K GPUs of one node, or M whole nodes "
                            "(all their GPUs); give one of them")

    def as_json(self) -> dict[str, int | None]:
        return {"trial_gpus": self.trial_gpus, "trial_nodes": self.trial_nodes, "trial_cpus": self.trial_cpus}


@dataclass(frozen=True)
class Share:
    """One trial's share of the allocation, derived from the Pack and the job's group (pure): `nodes` nodes,
    `gpus` GPUs on each, `tasks` ranks on each, `cpus` CPUs per rank (None: Slurm's default), and how many such
    shares one node holds (`per_node`; a multi-node share: 1)."""

    nodes: int
    gpus: int
    tasks: int
    cpus: int | None
    per_node: int


def share_of(pack: Pack, nodes: int, gpus_per_node: int, tasks_per_node: int, one_task_per_node: bool,
             cpus_per_task: int | None) -> Share:
    """A trial's share in a job of `nodes` nodes of `gpus_per_node` GPUs; PackError in one line for a share that
    cannot fit (pure). `tasks_per_node`: --ntasks-per-node (CPU-only nodes: the trials on a node)."""
    if pack.trial_nodes is not None:
        if pack.trial_nodes > nodes:
            raise PackError(f"--trial-nodes {pack.trial_nodes}: a trial share larger than the job's {nodes} node(s); "
                            f"ask --nodes {pack.trial_nodes} or more, or a smaller --trial-nodes")
        if pack.trial_cpus is not None and gpus_per_node:
            raise PackError(_CPUS_WITH_GPUS)
        ranks = (1 if one_task_per_node else gpus_per_node) if gpus_per_node else tasks_per_node
        return Share(pack.trial_nodes, gpus_per_node, ranks, pack.trial_cpus or cpus_per_task, 1)
    if gpus_per_node:
        if pack.trial_cpus is not None:
            raise PackError(_CPUS_WITH_GPUS)
        gpus = pack.trial_gpus or 1
        if gpus > gpus_per_node:
            raise PackError(f"--trial-gpus {gpus}: a trial share larger than a node ({gpus_per_node} GPU(s)); ask "
                            f"--trial-gpus {gpus_per_node} or less, or --trial-nodes M for whole nodes")
        if gpus_per_node % gpus:
            raise PackError(f"--trial-gpus {gpus} does not divide a node's {gpus_per_node} GPUs: "
                            f"{gpus_per_node % gpus} would stay idle on every node; ask a divisor of {gpus_per_node}")
        return Share(1, gpus, 1 if one_task_per_node else gpus, cpus_per_task, gpus_per_node // gpus)
    if pack.trial_gpus is not None:
        raise PackError(f"--trial-gpus {pack.trial_gpus} with no GPUs per node: add --gpus-per-node G, or give "
                        "CPU trials --trial-cpus C")
    if pack.trial_cpus is not None and cpus_per_task is not None and cpus_per_task != pack.trial_cpus:
        raise PackError(f"--trial-cpus {pack.trial_cpus} with --cpus-per-task {cpus_per_task}: a CPU trial's one task "
                        "has --trial-cpus CPUs; drop --cpus-per-task")
    return Share(1, 0, 1, pack.trial_cpus or cpus_per_task, tasks_per_node)


_CPUS_WITH_GPUS = ("--trial-cpus applies on CPU-only nodes (no --gpus-per-node); a GPU trial's share is "
                   "--trial-gpus K (or --trial-nodes M)")


def job_tasks_per_node(share: Share) -> int:
    """The batch job's --ntasks-per-node: every share's ranks on a node, so that Slurm allocates their CPUs
    (a step asks its own ranks from the allocation with --exact) (pure)."""
    return share.tasks * share.per_node


def shares_in(share: Share, nodes: int) -> int:
    """How many trials the allocation runs at once (pure)."""
    return nodes // share.nodes if share.nodes > 1 else nodes * share.per_node
