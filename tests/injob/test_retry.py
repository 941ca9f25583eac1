"""Whether to retry a failed job, and which nodes it may no longer use: never so many it could not be placed."""

from __future__ import annotations

from hpc_train.injob.failures import Failure
from hpc_train.injob.retry import plan_retry, usable_and_lost

DIED = Failure("died", "node2 task 1: Killed", "node2 task 1 was killed", ("node2",))
NODES = {"node1", "node2", "node3", "node4"}


def test_the_node_to_blame_is_added_to_those_excluded_before() -> None:
    plan = plan_retry(DIED, 0, 3, ["node4"], NODES, 2)
    assert (plan.retry, plan.exclude, plan.added, plan.why) == (True, ("node2", "node4"), ("node2",), "")


def test_a_job_that_would_no_longer_fit_is_retried_without_excluding_and_says_so() -> None:
    plan = plan_retry(DIED, 0, 3, [], {"node1", "node2"}, 2)
    assert plan.retry and plan.exclude == () and "node2 not excluded: the job needs 2 node(s)" in plan.why
    crowded = plan_retry(DIED, 0, 3, ["node3", "node4"], NODES - {"node1"}, 2)
    assert crowded.retry and crowded.exclude == () and crowded.why.startswith("no node excluded")


def test_no_retry_when_off_exhausted_or_pointless() -> None:
    assert "max_retries is 0" in plan_retry(DIED, 0, 0, [], NODES, 2).why
    exhausted = plan_retry(DIED, 3, 3, [], NODES, 2)
    assert not exhausted.retry and exhausted.why.startswith("retries exhausted (3 of 3)")
    hopeless = Failure("task_error", "x", "x", retryable=False, why_not="the task module failed")
    assert plan_retry(hopeless, 0, 3, [], NODES, 2).why == "not retried: the task module failed"


def test_sinfo_states_split_into_usable_and_lost() -> None:
    usable, lost = usable_and_lost({"node1": "idle", "node2": "down*", "node3": "alloc", "node4": "drain",
                                    "node5": "mix*", "node6": "fail", "node7": "comp"})
    assert usable == {"node1", "node3", "node7"} and lost == {"node2", "node5", "node6"}
