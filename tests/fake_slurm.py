"""Environments as `srun` gives them to one task, for tests without a cluster."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

# Variables that would leak a real job's identity into a test.
_LEAKY_PREFIXES = ("SLURM", "SLURMD_", "CUDA_VISIBLE_DEVICES", "TF_CONFIG")


def step_env(nodelist: str, tasks_per_node: str, rank: int, *, hosts_by_rank: Sequence[str] | None = None,
             job_id: int | None = 4242, distribution: str | None = None,
             extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The step variables of task `rank`.

    With `hosts_by_rank` (the host of every rank, as the test expects it), the
    task's own SLURM_NODEID, SLURM_LOCALID and SLURMD_NODENAME are filled in too,
    as srun would; they come from the expectation, not from the code under test.
    """
    env = {"SLURM_STEP_NODELIST": nodelist, "SLURM_STEP_TASKS_PER_NODE": tasks_per_node,
           "SLURM_PROCID": str(rank)}
    if job_id is not None:
        env["SLURM_JOB_ID"] = str(job_id)
    if distribution is not None:
        env["SLURM_DISTRIBUTION"] = distribution
    if hosts_by_rank is not None:
        host = hosts_by_rank[rank]
        distinct_hosts = list(dict.fromkeys(hosts_by_rank))
        env["SLURM_STEP_NUM_TASKS"] = str(len(hosts_by_rank))
        env["SLURM_NODEID"] = str(distinct_hosts.index(host))
        env["SLURM_LOCALID"] = str(list(hosts_by_rank[:rank]).count(host))
        env["SLURMD_NODENAME"] = host
    env.update(extra or {})
    return env


def without_slurm(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """A copy of `environ` with every Slurm, CUDA and TF_CONFIG variable removed."""
    return {name: value for name, value in environ.items() if not name.startswith(_LEAKY_PREFIXES)}


def waiting_srun(bin_dir: Path, record: Path, ready: Path) -> None:
    """An `srun` whose step waits: it notes each USR1/USR2 it gets in `record`, exits 75 after one
    (as a trainer that saved and stopped), and touches `ready` once its traps are set."""
    bin_dir.mkdir(exist_ok=True)
    srun = bin_dir / "srun"
    srun.write_text("#!/bin/bash\n"
                    f'trap \'echo USR1 "$*" >> "{record}"; exit 75\' USR1\n'
                    f'trap \'echo USR2 "$*" >> "{record}"; exit 75\' USR2\n'
                    f'touch "{ready}"\n'
                    "for _ in $(seq 600); do sleep 0.1; done\nexit 1\n")
    srun.chmod(0o755)
