"""Whether to retry a failed job, and which nodes it may no longer use: never so many it could not be placed."""

from __future__ import annotations

from pathlib import Path

from hpc_train.injob.failures import Failure
from hpc_train.injob.retry import (expand_nodes, given_back, keep_given_back_out, plan_retry, requeue_excluding,
                                   still_excluded, usable_and_lost)
from tests.fake_slurm import FakeSlurm, Reply

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


def test_a_requeue_excluding_nodes_retries_the_update_slurm_refuses_at_first(tmp_path: Path) -> None:
    refused = Reply(stderr="scontrol: error: Job is no longer pending execution\n", code=1)
    fake = FakeSlurm(tmp_path, {"scontrol requeue": "", "scontrol update": [refused, Reply()]})
    assert requeue_excluding("42", ("node2", "node3"), fake.client()) is None
    assert fake.lines() == ["scontrol requeue 42", *["scontrol update JobId=42 ExcNodeList=node2,node3"] * 2]
    never = FakeSlurm(tmp_path / "never", {"scontrol requeue": "", "scontrol update": refused})
    assert requeue_excluding("42", ("node2",), never.client(), timeout=0.3) == (
        "requeued, but scontrol update ExcNodeList=node2 failed (scontrol: error: Job is no longer pending execution)")
    disabled = Reply(stderr="Requested operation is presently disabled", code=1)
    no_requeue = FakeSlurm(tmp_path / "no", {"scontrol": disabled})
    assert requeue_excluding("42", ("node2",), no_requeue.client()) == (
        "scontrol requeue 42 failed (Requested operation is presently disabled)")
    assert no_requeue.lines() == ["scontrol requeue 42"]


def test_nodes_given_back_after_failing_stay_out_of_a_requeue_the_job_did_not_plan(tmp_path: Path) -> None:
    # (issue 48) A node range gave node3 back after a failure there (shrink.py's history entry), then a rank
    # requeued the job near its time limit: the next allocation must not take node3 again, as a retry's would not.
    history = [{"attempt": 1, "released": ["node3"]}, {"attempt": 2}, {"attempt": 3, "released": ["node4", "node3"]}]
    assert given_back(history) == ["node3", "node4"] and given_back([{"attempt": 1}]) == []
    assert still_excluded("node1", ["node3", "node4"], expand_nodes) == "node1,node3,node4"
    assert still_excluded("node[3-4]", ["node3"], expand_nodes) is None  # already out: nothing to ask
    assert still_excluded("(null)", ["node3"], expand_nodes) == "node3"
    shown = "JobId=42 JobState=REQUEUED ExcNodeList=node1 NodeList=node[1-2]\n"
    refused = Reply(stderr="scontrol: error: Job is no longer pending execution\n", code=1)
    fake = FakeSlurm(tmp_path, {"scontrol show": shown, "scontrol update": [refused, Reply()]})
    assert keep_given_back_out("42", ["node3"], fake.client(), expand_nodes) is None
    assert fake.lines("scontrol")[-2:] == ["scontrol update JobId=42 ExcNodeList=node1,node3"] * 2
    nothing = FakeSlurm(tmp_path / "nothing", {})
    assert keep_given_back_out("42", [], nothing.client(), expand_nodes) is None and nothing.lines() == []
    never = FakeSlurm(tmp_path / "never", {"scontrol show": shown, "scontrol update": refused})
    assert keep_given_back_out("42", ["node3"], never.client(), expand_nodes, timeout=0.3) == (
        "requeued, but scontrol update ExcNodeList=node1,node3 failed (scontrol: error: Job is no longer pending "
        "execution)")
