"""Which nodes of a packed sweep's allocation were lost, as Slurm and srun say it.

Under `--no-kill` (a packed job asks it) Slurm keeps the job when a node fails: srun says
`srun: error: Node failure on X` the moment it happens (and its step may then end with 0, or go on waiting), Slurm
takes the node out of the job's NodeList, and sinfo says it is down or not responding (a node whose slurmd answers
again may come back to the partition, never to the step). Any of the three is enough.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

from hpc_train.injob.retry import usable_and_lost
from hpc_train.slurm.client import SlurmClient

NODE_FAILURE = re.compile(r"srun: error: Node failure on (\S+)")


def failed_node(srun_line: str) -> str | None:
    """The node an srun line says failed under its step, or None (pure)."""
    failure = NODE_FAILURE.search(srun_line)
    return failure.group(1) if failure else None


def lost_nodes(env: Mapping[str, str], ours: Collection[str], said: Collection[str] = ()) -> set[str]:
    """Of the allocation's nodes `ours`: those srun `said` failed, those no longer in the job's NodeList, those
    sinfo says are lost."""
    import hostlist

    slurm = SlurmClient.local(env)
    held = slurm.show_job(env["SLURM_JOB_ID"]).get("NodeList") if env.get("SLURM_JOB_ID") else None
    dropped = set(ours) - set(hostlist.expand_hostlist(held)) if held and held != "(null)" else set()
    _, down = usable_and_lost(slurm.node_states())
    return (dropped | down | set(said)) & set(ours)
