"""A job's ports for the job's nodes alone (pure): the nft table a prolog loads, and which tables a sweep removes.

One table per job, `table inet hpc_train_job_<ID>`, holding one input chain:
connections to the job's port window (bootstrap.ports.derived_window) are
accepted from the job's own nodes' addresses and from the node itself
(loopback), and dropped from anywhere else. Its policy is accept, so it never
opens what another table closes: in nftables a packet must pass every base
chain of a hook, and a drop anywhere is final. Nothing here names a table
that is not ours (`hpc_train_job_` and digits).

A heterogeneous job is one job to its ranks and its services but several to Slurm: each component has a job id of
its own (the leader's, then the next ones), and each component's nodes run the prolog with that id and that
component's nodes alone; SLURM_HET_JOB_ID names the leader (Slurm 22.05, captured in tests/site/slurm_22_05_het/).
Its ranks take the window of the leader's id, for the tasks of the components their step spans: every one but the
data service's own, which the job's comment names. So every component's table (named by its own id: its epilog
removes that one) opens that one window to the nodes of every component, read from the leader's `scontrol show
job`, which lists every component, a line each.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hpc_train.bootstrap.nodelist import expand_nodelist
from hpc_train.bootstrap.ports import derived_window, ports_above, service_component
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
    # A heterogeneous job's component: its leader's id (the leader's own component's too); None for a plain job.
    het_leader: str | None = None

    @classmethod
    def from_environ(cls, env: Mapping[str, str]) -> JobOnNode:
        """SLURM_JOB_ID, SLURM_JOB_NODELIST (Slurm 22.05's prolog sets SLURM_NODELIST), SLURMD_NODENAME, and in a
        heterogeneous job's SLURM_HET_JOB_ID (SLURM_PACK_JOB_ID); HpcTrainError (one line) when one is missing or
        bad: not run by slurmd as its Prolog or Epilog?"""
        job_id = _job_id("SLURM_JOB_ID", env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or "")
        leader = env.get("SLURM_HET_JOB_ID") or env.get("SLURM_PACK_JOB_ID")
        variable = "SLURM_JOB_NODELIST" if env.get("SLURM_JOB_NODELIST") else "SLURM_NODELIST"
        nodes = expand_nodelist(variable, env.get(variable, ""))
        return cls(job_id, nodes, env.get("SLURMD_NODENAME", ""),
                   _job_id("SLURM_HET_JOB_ID", leader) if leader else None)

    @property
    def asked(self) -> str:
        """The job whose `scontrol show job` says all the prolog needs: the leader's lists every component."""
        return self.het_leader or self.job_id


@dataclass(frozen=True)
class Guarded:
    """What a node's table guards: the job's window, open to these nodes (and loopback) alone."""

    window: range
    nodes: tuple[str, ...]
    het_leader: str | None = None  # the heterogeneous job whose window and nodes these are; None: a plain job


def _job_id(variable: str, value: str) -> str:
    if not value.isdigit():
        raise HpcTrainError(f"{variable}={value!r}: not a job id; run it as Slurm's Prolog or Epilog "
                            "(slurm.conf Prolog=, Epilog=), which sets it")
    return value


def table_name(job_id: str) -> str:
    return f"{TABLE_PREFIX}{job_id}"


def job_window(job_id: str, tasks: int | None, nodes: int, comment: str | None = None) -> range:
    """The window the job's ranks and services listen in. `tasks`: the job's task count (scontrol's NumTasks);
    unknown, one task per node (hpc-train's multi-worker layout). Spread evenly, as many on a node as the bootstrap
    counts. `comment`: the job's Slurm comment, whose word says the ports of its services (its data service) above
    the ranks' (bootstrap.ports.service_comment): the window grows by them, as the body's and the ranks' do."""
    count = tasks if tasks and tasks > 0 else nodes
    return derived_window(int(job_id), count, -(-count // max(1, nodes)), ports_above(comment))


def guarded(job: JobOnNode, shown: Sequence[Mapping[str, str]]) -> Guarded:
    """The window and the nodes a prolog guards, from `scontrol show job -o JOB.asked` (a record a line; none when
    Slurm did not answer). A plain job: its own window (for its NumTasks; one task a node when Slurm is silent)
    and its own nodes. A heterogeneous job's component: the whole job's (the module's docstring); HpcTrainError
    when Slurm did not list its components, since this component's nodes alone would cut the job apart."""
    if job.het_leader is None:
        tasks, comment = (shown[0].get("NumTasks", ""), shown[0].get("Comment")) if shown else ("", None)
        return Guarded(job_window(job.job_id, int(tasks) if tasks.isdigit() else None, len(job.nodes), comment),
                       job.nodes)
    components = sorted((record for record in shown if record.get("HetJobId") == job.het_leader),
                        key=lambda record: _number(record, "HetJobOffset"))
    listed = {record.get("JobId", "") for record in components}
    every = all(_lists_all(listed, record.get("HetJobIdSet", "")) for record in components)
    if job.job_id not in listed or not every:
        raise HpcTrainError(f"Slurm did not list the components of heterogeneous job {job.het_leader} (scontrol "
                            f"show job {job.het_leader}), and this component's nodes alone would cut the job apart")
    comment = components[0].get("Comment")
    service = service_component(comment)
    ranks = [record for record in components if _number(record, "HetJobOffset") != service]
    nodes = tuple(dict.fromkeys(node for record in components
                                for node in expand_nodelist("NodeList", record.get("NodeList", ""))))
    return Guarded(het_window(job.het_leader, ranks, ports_above(comment)), nodes, job.het_leader)


def het_window(leader: str, ranks: Sequence[Mapping[str, str]], above: int) -> range:
    """A heterogeneous job's window, as its ranks take it (bootstrap/hetstep.py): the leader's id, the tasks of the
    components their step spans (`ranks`: NumTasks, one a node where Slurm says none), at most as many on a node as
    the fullest of them holds, and `above` ports of its data service."""
    counts = [(_number(record, "NumTasks") or _number(record, "NumNodes") or 1, _number(record, "NumNodes") or 1)
              for record in ranks] or [(1, 1)]
    per_node = max(-(-tasks // nodes) for tasks, nodes in counts)
    return derived_window(int(leader), sum(tasks for tasks, _ in counts), per_node, above)


def _lists_all(listed: set[str], id_set: str) -> bool:
    """Whether `listed` holds every job id of scontrol's HetJobIdSet (`7301005-7301007`, or a comma's list of
    such; an empty one asks nothing)."""
    spans = [(int(first), int(last or first)) for part in filter(None, id_set.split(","))
             for first, _, last in [part.partition("-")] if first.isdigit() and (last or first).isdigit()]
    ids = {int(job) for job in listed if job.isdigit()}
    return sum(last - first + 1 for first, last in spans) == sum(
        1 for first, last in spans for job in ids if first <= job <= last)


def _number(record: Mapping[str, str], key: str) -> int:
    value = record.get(key, "")
    return int(value) if value.isdigit() else 0


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
