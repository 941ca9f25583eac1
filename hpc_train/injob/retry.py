"""Retrying a failed job on healthy nodes: the plan (pure), and asking Slurm for it.

Slurm refuses to change a running job's excluded nodes ("no longer
pending"), so the batch script requeues its own job first (`scontrol
requeue`) and then, while the job waits to start again, adds the nodes to
blame (`scontrol update JobId=J ExcNodeList=...`). The requeue sends the
batch script SIGTERM, and SIGKILL KillWait seconds later: the script and this
process ignore the first and are done long before the second.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpc_train.slurm.client import SlurmClient, last_words
from hpc_train.injob.failures import Failure
from hpc_train.version import PREFIX

# sinfo's short states of a node that cannot take a job now (a trailing "*": not responding).
_UNUSABLE = ("down", "drain", "drng", "drained", "fail", "failg", "maint", "unk", "futr", "inval", "powered_down",
             "pow_dn", "powering_down")
# Of those, the states of a node that is lost, not merely set aside.
_LOST = ("down", "fail", "failg", "unk")


@dataclass(frozen=True)
class RetryPlan:
    retry: bool
    exclude: tuple[str, ...] = ()  # the job's excluded nodes for the next attempt: those before and the new ones
    added: tuple[str, ...] = ()  # the nodes newly excluded
    why: str = ""  # why not retried; or, retried, why a node to blame was not excluded


def plan_retry(failure: Failure, retries_used: int, max_retries: int, excluded: Collection[str],
               usable: Collection[str] | None, nodes_needed: int) -> RetryPlan:
    """Whether to retry, and which nodes the job may no longer use (`usable`: the partition's nodes that can take
    a job now, None when unknown). Never so many that the job could no longer be placed."""
    if not failure.retryable:
        return RetryPlan(False, why=f"not retried: {failure.why_not}")
    if max_retries < 1:
        return RetryPlan(False, why="not retried: max_retries is 0 (--max-retries N retries a failed job)")
    if retries_used >= max_retries:
        return RetryPlan(False, why=f"retries exhausted ({retries_used} of {max_retries}): resubmit it to resume, "
                                    "or raise --max-retries")
    before = tuple(sorted(excluded))
    wanted = tuple(sorted({*before, *failure.blame}))
    added = tuple(node for node in wanted if node not in before)
    if usable is None or len(set(usable) - set(wanted)) >= nodes_needed:
        return RetryPlan(True, wanted, added)
    if added and len(set(usable) - set(before)) >= nodes_needed:
        return RetryPlan(True, before, (), f"{', '.join(added)} not excluded: the job needs {nodes_needed} node(s) "
                                           f"and the partition would have {len(set(usable) - set(wanted))} left")
    return RetryPlan(True, (), (), f"no node excluded: the job needs {nodes_needed} node(s), "
                                   f"and only {len(set(usable))} can take it now")


def usable_and_lost(states: Mapping[str, str]) -> tuple[set[str], set[str]]:
    """From sinfo's node states: the nodes that can take a job now, and those lost (down, failed, not responding)."""
    usable, lost = set(), set()
    for node, state in states.items():
        base = state.rstrip("*~#!%$@^-+").lower()
        if state.endswith("*") or base in _LOST:
            lost.add(node)
        elif base not in _UNUSABLE:
            usable.add(node)
    return usable, lost


def component_exclusions(exclude: Collection[str], components: Sequence[Mapping[str, str]],
                         expand: Callable[[str], list[str]]) -> list[tuple[str, tuple[str, ...]]]:
    """A heterogeneous job's excluded nodes, each in the component that ran on it or excluded it before: (the
    component's own job id, its nodes), in order (pure). Slurm keeps ExcNodeList per component."""
    targets = []
    for part in components:
        own = {*expand(part.get("NodeList", "")), *expand(part.get("ExcNodeList", ""))}
        targets.append((part.get("JobId", ""), tuple(node for node in sorted(exclude) if node in own)))
    return targets


def requeue_excluding(job_id: str, exclude: tuple[str, ...], slurm: SlurmClient,
                      timeout: float = 4.0, targets: Sequence[tuple[str, tuple[str, ...]]] | None = None) -> str | None:
    """Requeue the job, then set its excluded nodes; None when both were done, else what went wrong.
    `targets`: a heterogeneous job's (component job id, its excluded nodes); else the job's own, `exclude`.

    Run from the job's own batch script: SIGTERM, which the requeue sends it, is ignored here.
    """
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    problem = slurm.requeue(job_id, timeout=30)
    if problem is not None:
        return f"scontrol requeue {job_id} failed ({problem})"
    if not exclude:
        return None
    for target, nodes in (targets if targets is not None else [(job_id, exclude)]):
        problem = _exclude(target, ",".join(nodes), slurm, timeout) if nodes else None
        if problem:
            return problem
    return None


def given_back(history: Sequence[Mapping[str, object]]) -> list[str]:
    """The nodes this job gave back after a failure there (a node range's shrink, shrink.py), oldest first (pure)."""
    nodes: list[str] = []
    for entry in history:
        released = entry.get("released") or ()
        nodes += [node for node in released if isinstance(node, str) and node not in nodes]  # type: ignore[union-attr]
    return nodes


def still_excluded(excluded: str, given: Sequence[str], expand: Callable[[str], list[str]]) -> str | None:
    """The ExcNodeList a requeued job needs so that nodes given back after a failure stay out of its next allocation,
    or None when it already has them (pure)."""
    before = expand(excluded) if excluded and excluded != "(null)" else []
    missing = [node for node in given if node not in before]
    return ",".join([*before, *missing]) if missing else None


def keep_given_back_out(job_id: str, given: Sequence[str], slurm: SlurmClient,
                        expand: Callable[[str], list[str]], timeout: float = 4.0) -> str | None:
    """After a requeue this process did not ask for itself (a rank's, near the time limit), the nodes the job gave
    back after a failure stay excluded, as a retry's requeue keeps them (requeue_excluding): None when done or
    nothing to do, else what went wrong. Slurm takes the update only once the job waits again."""
    if not given:
        return None
    wanted = still_excluded(slurm.show_job(job_id, timeout=timeout).get("ExcNodeList", ""), given, expand)
    return _exclude(job_id, wanted, slurm, timeout) if wanted else None


def keep_given_back_out_of(run_dir: Path, job_id: str) -> None:
    """keep_given_back_out for this job, from its run folder's history; a refusal is one line (the requeue stands)."""
    from hpc_train.runs import attempts

    problem = keep_given_back_out(job_id, given_back(attempts.history(run_dir)), SlurmClient.local(), expand_nodes)
    if problem:
        print(f"{PREFIX}: warning: {problem}; the nodes given back after failing may be allocated again",
              file=sys.stderr, flush=True)


def _exclude(job_id: str, wanted: str, slurm: SlurmClient, timeout: float) -> str | None:
    deadline = time.monotonic() + timeout
    while True:  # the controller takes the update once the job is requeued (a moment after the requeue returns)
        result = slurm.update_job(job_id, ExcNodeList=wanted)
        if result.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if result.returncode != 0:
        return f"requeued, but scontrol update ExcNodeList={wanted} failed ({last_words(result)})"
    return None


def expand_nodes(nodes: str) -> list[str]:
    """A Slurm node list as names; none for an empty, "(null)" or unreadable one."""
    if not nodes or nodes == "(null)":
        return []
    import hostlist

    try:
        return list(hostlist.expand_hostlist(nodes))
    except hostlist.BadHostlist:
        return []
