"""A job's ports for the job's nodes alone (pure): the nft table a prolog loads, and which tables a sweep removes.

One table per job, `table inet hpc_train_job_<ID>`, holding one input chain:
connections to the job's port window (bootstrap.ports.derived_window) are
accepted from the job's own nodes' addresses and from the node itself
(loopback), and dropped from anywhere else. Its policy is accept, so it never
opens what another table closes: in nftables a packet must pass every base
chain of a hook, and a drop anywhere is final. Nothing here names a table
that is not ours (`hpc_train_job_` and digits).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hpc_train.bootstrap.nodelist import expand_nodelist
from hpc_train.bootstrap.ports import derived_window, ports_above
from hpc_train.errors import HpcTrainError

TABLE_PREFIX = "hpc_train_job_"
FAMILY = "inet"
# Before the usual filter chains (priority 0): our drop is final whatever they accept.
PRIORITY = -10
_OURS = re.compile(rf"^table {FAMILY} {TABLE_PREFIX}(\d+)$")


@dataclass(frozen=True)
class JobOnNode:
    """What the prolog and epilog know from Slurm's environment: the job, its nodes, and this node."""

    job_id: str
    nodes: tuple[str, ...]
    node: str

    @classmethod
    def from_environ(cls, env: Mapping[str, str]) -> JobOnNode:
        """SLURM_JOB_ID, SLURM_JOB_NODELIST (SLURM_NODELIST on older Slurm), SLURMD_NODENAME; HpcTrainError
        (one line) when one is missing or bad: not run by slurmd as its Prolog or Epilog?"""
        job_id = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or ""
        if not job_id.isdigit():
            raise HpcTrainError(f"SLURM_JOB_ID={job_id!r}: not a job id; run it as Slurm's Prolog or Epilog "
                                "(slurm.conf Prolog=, Epilog=), which sets it")
        variable = "SLURM_JOB_NODELIST" if env.get("SLURM_JOB_NODELIST") else "SLURM_NODELIST"
        nodes = expand_nodelist(variable, env.get(variable, ""))
        return cls(job_id, nodes, env.get("SLURMD_NODENAME", ""))


def table_name(job_id: str) -> str:
    return f"{TABLE_PREFIX}{job_id}"


def job_window(job_id: str, tasks: int | None, nodes: int, comment: str | None = None) -> range:
    """The window the job's ranks and services listen in. `tasks`: the job's task count (scontrol's NumTasks);
    unknown, one task per node (hpc-train's multi-worker layout). Spread evenly, as many on a node as the bootstrap
    counts. `comment`: the job's Slurm comment, whose word says the ports of its services (its data service) above
    the ranks' (bootstrap.ports.service_comment): the window grows by them, as the body's and the ranks' do."""
    count = tasks if tasks and tasks > 0 else nodes
    return derived_window(int(job_id), count, -(-count // max(1, nodes)), ports_above(comment))


def ruleset(job_id: str, window: range, addresses: Iterable[str]) -> str:
    """`nft -f` input that (re)creates the job's table: the window open to `addresses` and loopback only.

    The first two lines make the load replace a table left by an earlier run of the same job (a requeue) in
    one transaction: `table` creates it if missing, so `delete` never fails."""
    name = f"{FAMILY} {table_name(job_id)}"
    ports = f"{window.start}-{window.stop - 1}"
    v4 = sorted({a for a in addresses if ipaddress.ip_address(a).version == 4}, key=ipaddress.ip_address)
    v6 = sorted({a for a in addresses if ipaddress.ip_address(a).version == 6}, key=ipaddress.ip_address)
    rules = ['iif "lo" accept',
             *([f"tcp dport {ports} ip saddr {{ {', '.join(v4)} }} accept"] if v4 else []),
             *([f"tcp dport {ports} ip6 saddr {{ {', '.join(v6)} }} accept"] if v6 else []),
             f"tcp dport {ports} drop"]
    body = "\n".join(f"\t\t{rule}" for rule in rules)
    return (f"table {name}\ndelete table {name}\ntable {name} {{\n\tchain input {{\n"
            f"\t\ttype filter hook input priority {PRIORITY}; policy accept;\n{body}\n\t}}\n}}\n")


def our_tables(listed: str) -> list[str]:
    """The job ids of our tables in `nft list tables` output; every other table is left out, so never touched."""
    return [match.group(1) for line in listed.splitlines() if (match := _OURS.match(line.strip()))]


def stale_tables(ours: Sequence[str], jobs_here: Iterable[str] | None, current: str) -> list[str]:
    """The job ids whose tables a prolog sweeps: left by an epilog that never ran, for jobs no longer on this
    node. `jobs_here` None (Slurm did not answer): none, since a table of a running job must stay."""
    if jobs_here is None:
        return []
    keep = {*jobs_here, current}
    return [job for job in ours if job not in keep]
