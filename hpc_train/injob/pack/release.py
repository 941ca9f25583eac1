"""Giving a packed sweep's nodes back to Slurm while it runs: its edge (which nodes go is core.to_release's choice).
A node range's retry gives its failed node back the same way (injob/shrink.py).

Slurm shrinks a running job when asked (`scontrol update JobId=J NodeList=<the nodes kept>`, SlurmClient.resize_job):
the nodes not named leave the job at once, to the queue behind it, and the job runs on. The batch script's own
variables (SLURM_JOB_NODELIST, SLURM_NNODES, SLURM_NTASKS, ...) then describe the old allocation; Slurm writes the
right ones in `slurm_job_J_resize.sh` in scontrol's folder, which the pack reads into the environment its later
steps start with. A release Slurm refuses (an old Slurm, a site that forbids it) is its complaint, for one line.
A requeued job comes back at its full size by itself (Slurm 22.05 allocates the size it was submitted with).
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from hpc_train.slurm.client import SlurmClient

RESIZE_SCRIPT = "slurm_job_{job_id}_resize.sh"
_EXPORT = re.compile(r'^\s*export\s+(\w+)=(?:"([^"]*)"|(\S*))\s*$')
_UNSET = re.compile(r"^\s*unset\s+(\w+)\s*$")


def resize_variables(script: str) -> dict[str, str | None]:
    """What slurm_job_J_resize.sh sets (`export NAME="value"`) and unsets (None) (pure)."""
    variables: dict[str, str | None] = {}
    for line in script.splitlines():
        if exported := _EXPORT.match(line):
            variables[exported.group(1)] = exported.group(2) if exported.group(2) is not None else exported.group(3)
        elif unset := _UNSET.match(line):
            variables[unset.group(1)] = None
    return variables


def resized(env: Mapping[str, str], variables: Mapping[str, str | None]) -> dict[str, str]:
    """The environment with the resize's variables set and unset (pure)."""
    return {**{name: value for name, value in env.items() if name not in variables},
            **{name: value for name, value in variables.items() if value is not None}}


def batch_host(env: Mapping[str, str], hosts: Sequence[str]) -> str:
    """The node running the batch script (the pack itself), which Slurm never takes back: this process's node, else
    the allocation's first (pure)."""
    here = env.get("SLURMD_NODENAME", "")
    return here if here in hosts else hosts[0]


def give_back(env: Mapping[str, str], nodes: Sequence[str], hosts: Sequence[str]) -> tuple[str | None, dict[str, str]]:
    """Ask Slurm to take `nodes` out of the running job, keeping the rest of what it holds now (its NodeList, else
    `hosts`): (None, the environment after the resize), or (Slurm's complaint, `env` unchanged)."""
    import hostlist

    slurm, job_id = SlurmClient.local(env), env.get("SLURM_JOB_ID", "")
    if not job_id:
        return "no SLURM_JOB_ID: not a Slurm job", dict(env)
    held = slurm.show_job(job_id).get("NodeList", "")
    now = hostlist.expand_hostlist(held) if held and held != "(null)" else list(hosts)
    kept = [node for node in now if node not in nodes]
    if not kept:
        return "it would leave the job no node", dict(env)
    with tempfile.TemporaryDirectory(prefix="hpc-train-resize-") as folder:
        problem = slurm.resize_job(job_id, hostlist.collect_hostlist(kept), folder)
        if problem is not None:
            return problem, dict(env)
        script = Path(folder) / RESIZE_SCRIPT.format(job_id=job_id)
        text = script.read_text() if script.is_file() else ""
    variables = resize_variables(text) or {"SLURM_JOB_NODELIST": hostlist.collect_hostlist(kept),
                                           "SLURM_NODELIST": hostlist.collect_hostlist(kept),
                                           "SLURM_JOB_NUM_NODES": str(len(kept)), "SLURM_NNODES": str(len(kept)),
                                           "SLURM_NTASKS": None, "SLURM_NPROCS": None, "SLURM_TASKS_PER_NODE": None}
    return None, resized(env, variables)

