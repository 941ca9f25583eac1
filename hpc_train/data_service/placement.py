"""Whether the CPUs a job holds on its nodes fit its data workers beside the ranks (pure; docs/data_service.md).

The job body starts W workers of C CPUs as one `srun --overlap` step over min(W, nodes) of the job's nodes, cyclic:
ceil(W / k) of them on some nodes, floor on the rest. `--overlap` lets them share the ranks' CPUs, but a step must
still fit in the CPUs the job holds on each node: Slurm refuses one that does not at once ("More processors
requested than permitted"). The job's request asks for both (spec/directives.py: --mincpus); where the job still
holds fewer (Slurm 22.05 gives --ntasks-per-node x --cpus-per-task a node whatever --mincpus says, a job of an
older script or plain sbatch), `misfit` says why in words before anything is started.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from hpc_train.bootstrap.nodelist import expand_nodelist

_CPUS = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")


def node_cpus(text: str) -> tuple[int, ...] | None:
    """Each node's CPUs as SLURM_JOB_CPUS_PER_NODE says them (`4(x2),2`: 4, 4, 2); None when it says nothing
    readable."""
    counts: list[int] = []
    for part in filter(None, (piece.strip() for piece in text.split(","))):
        found = _CPUS.match(part)
        if found is None:
            return None
        counts += [int(found.group(1))] * int(found.group(2) or 1)
    return tuple(counts) or None


def held(env: Mapping[str, str]) -> list[tuple[str, int]] | None:
    """(node, CPUs the job holds there) for the job's nodes (a heterogeneous job's first component's: srun's steps
    go there by default); None when Slurm's variables do not say."""
    cpus = node_cpus(env.get("SLURM_JOB_CPUS_PER_NODE_HET_GROUP_0") or env.get("SLURM_JOB_CPUS_PER_NODE", ""))
    nodelist = env.get("SLURM_JOB_NODELIST_HET_GROUP_0") or env.get("SLURM_JOB_NODELIST", "")
    if cpus is None or not nodelist:
        return None
    nodes = expand_nodelist("SLURM_JOB_NODELIST", nodelist)
    return list(zip(nodes, cpus)) if len(nodes) == len(cpus) else None


def per_node(workers: int, nodes: int) -> list[int]:
    """The workers srun's cyclic distribution puts on each of the min(workers, nodes) nodes it spreads them over."""
    spread = max(1, min(workers, nodes))
    return [workers // spread + (1 if index < workers % spread else 0) for index in range(spread)]


def misfit(holding: Sequence[tuple[str, int]], workers: int, cpus: int, cpus_per_task: str = "") -> str | None:
    """Why `workers` workers of `cpus` CPUs cannot be one step in the CPUs the job holds (`holding`, from `held`),
    with the fix; None when they fit. The workers go to the nodes that hold the most (srun chooses among the
    job's); `cpus_per_task`: SLURM_CPUS_PER_TASK, the user's --cpus-per-task, which caps what Slurm gives a node."""
    if not holding:
        return None
    counts = per_node(workers, len(holding))
    roomiest = sorted(holding, key=lambda node: -node[1])
    for (node, has), count in zip(roomiest, counts):
        if count * cpus > has:
            capped = (f" (with --cpus-per-task {cpus_per_task}, Slurm gives a node --ntasks-per-node x "
                      "--cpus-per-task CPUs, whatever else the job asks)") if cpus_per_task.isdigit() and \
                int(cpus_per_task) > 1 else ""
            return (f"its {workers} data worker(s) of {cpus} CPU(s) need {count * cpus} CPU(s) on {node} ({count} "
                    f"of them there), and this job holds {has} there{capped}; ask for fewer (--data-workers, "
                    "--data-cpus), whole nodes (--exclusive), or a partition of their own (--data-partition P)")
    return None
