"""A node range's retry inside its allocation (shrink.py): which nodes go back and when the job requeues instead
(pure), the attempts counted as a requeue's would be, and the epilogue that gives a node back and hands the next
attempt its environment (Slurm: tests/fake_slurm.py's, on PATH)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hpc_train.injob import shrink
from hpc_train.injob.epilogue import after_the_step
from hpc_train.injob.prologue import unexplained_restarts
from hpc_train.runs import attempts
from tests.fake_slurm import FakeSlurm, Reply, without_slurm

NODES = ["node1", "node2", "node3"]


def test_a_range_gives_back_the_node_it_blames_and_goes_on_with_the_rest() -> None:
    assert shrink.choose(True, True, ["node2"], NODES, "node1", 2) == shrink.Shrink(("node2",), ("node1", "node3"))
    # Nodes excluded before (not held now) are not this allocation's to give back.
    assert shrink.choose(True, True, ["node9", "node3"], NODES, "node1", 2).release == ("node3",)


@pytest.mark.parametrize("ranged, retry, exclude", [
    (False, True, ["node2"]),  # a fixed size: the next attempt needs as many nodes, a requeue finds them
    (True, False, ["node2"]),  # not retried
    (True, True, []),  # nothing blamed (or the partition too small to exclude it: retry.py said why)
    (True, True, ["node9"]),  # blamed, but not held now
])
def test_no_shrink_where_the_job_requeues_as_before(ranged: bool, retry: bool, exclude: list[str]) -> None:
    assert shrink.choose(ranged, retry, exclude, NODES, "node1", 2) is None


def test_the_batch_host_is_never_given_back_and_the_job_requeues_saying_why() -> None:
    choice = shrink.choose(True, True, ["node1"], NODES, "node1", 2)
    assert not choice.goes_on_here and not choice.release
    assert choice.why_not.startswith("node1 not given back while the job runs: it runs the batch script")


def test_never_below_min_the_job_requeues_instead() -> None:
    choice = shrink.choose(True, True, ["node2", "node3"], NODES, "node1", 2)
    assert not choice.goes_on_here
    assert choice.why_not == ("node2, node3 not given back while the job runs: its next attempt needs 2 node(s) and "
                              "1 would be left here; the job is requeued without them")


def test_the_released_line_has_the_packs_form() -> None:
    at = time.mktime((2026, 11, 27, 13, 5, 22, 0, 0, -1))
    assert shrink.released_line(["node2"], at, 1, 3, "2-4") == (
        "released node2 at 13:05:22, excluded after attempt 1 failed; attempt 2 goes on in this allocation with 3 "
        "of 2-4 nodes")


def test_attempts_count_slurms_restarts_and_the_retries_made_inside_an_allocation() -> None:
    history = [{"action": "retried", shrink.IN_ALLOCATION: True}, {"action": "requeued by Slurm"},
               {"action": "retried", shrink.IN_ALLOCATION: True}]
    slurms = {"SLURM_JOB_ID": "42", "SLURM_RESTART_COUNT": "1"}
    env = shrink.counted_restarts({**slurms, "SLURM_RESTART_COUNT": "7", "X": "y"}, slurms, history)
    assert env == {"SLURM_JOB_ID": "42", "SLURM_RESTART_COUNT": "3", "X": "y"}
    assert unexplained_restarts(int(env["SLURM_RESTART_COUNT"]), history) == 0  # every restart has its entry
    assert shrink.counted_restarts({"X": "y"}, {}, history) == {"X": "y"}  # not a Slurm job: no attempts to count


def _failed_step(tmp_path: Path, batch_host: str = "node1", node_range: str = "2-4",
                 update: Reply = Reply()) -> tuple[int, str, list[dict[str, str]], list[str], dict]:
    """The epilogue as the body runs it after rank 1 on node2 was killed, in a 3-node attempt of job 42."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    log = tmp_path / "slurm-42.out"
    log.write_text("hpc-train: job 42 on node[1-3]\nsrun: error: node2: task 1: Killed\n")
    fake = FakeSlurm(tmp_path / ".fake", {
        "scontrol": "", "scontrol update JobId=42 NodeList=node[1,3]": update,
        "scontrol show": f"JobId=42 JobState=RUNNING NodeList=node[1-3] NumNodes=3 ExcNodeList=(null) "
                         f"Partition=debug StdErr={log} StdOut={log}\n",
        "sinfo": "node1 idle\nnode2 idle\nnode3 idle\nnode4 idle\n"})
    env = {**without_slurm(fake.install(tmp_path / "bin")), "SLURM_JOB_ID": "42", "SLURMD_NODENAME": batch_host,
           "SLURM_JOB_NODELIST": "node[1-3]", "SLURM_JOB_NUM_NODES": "3", "HPC_TRAIN_NODE_RANGE": node_range,
           "HPC_TRAIN_NODES": "3"}
    went_on: list[dict[str, str]] = []
    code = after_the_step(137, run_dir, "multiworker", env, 3, go_on=went_on.append)
    state = json.loads((run_dir / "state.json").read_text())
    return code, "", went_on, fake.lines("scontrol"), state


def test_a_ranged_jobs_failed_node_goes_back_and_the_next_attempt_runs_here(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, went_on, calls, state = _failed_step(tmp_path)
    said = capsys.readouterr().err
    assert code == 0 and "scontrol update JobId=42 NodeList=node[1,3]" in calls
    assert not any("requeue" in call or "ExcNodeList" in call for call in calls)
    [env] = went_on
    assert (env["SLURM_JOB_NODELIST"], env["SLURM_JOB_NUM_NODES"]) == ("node[1,3]", "2")
    [entry] = state["attempts"]
    assert entry["in_allocation"] and entry["released"] == ["node2"] and entry["action"] == "retried"
    assert "hpc-train: attempt 2 of 4: retried after node2 task 1 was killed; node2 excluded\n" in said
    assert "hpc-train: released node2 at " in said and ", excluded after attempt 1 failed; attempt 2 goes on in " \
        "this allocation with 2 of 2-4 nodes" in said
    # status says it with the attempt (views: attempts.describe)
    assert "; released node2 at " in attempts.describe(entry, 1, 4)


@pytest.mark.parametrize("batch_host, node_range, update, why", [
    ("node2", "2-4", Reply(), "node2 not given back while the job runs: it runs the batch script"),
    ("node1", "3-4", Reply(), "node2 not given back while the job runs: its next attempt needs 3 node(s) and 2 "
                              "would be left here; the job is requeued without it"),
    ("node1", "2-4", Reply(stderr="scontrol: error: Invalid node name specified", code=1),
     "could not give node2 back to Slurm (scontrol: error: Invalid node name specified); the job is requeued "
     "without it"),
])
def test_where_the_node_cannot_go_now_the_job_requeues_without_it_saying_why(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], batch_host: str, node_range: str, update: Reply,
        why: str) -> None:
    code, _, went_on, calls, state = _failed_step(tmp_path, batch_host, node_range, update)
    said = capsys.readouterr().err
    assert code == 0 and not went_on and f"hpc-train: {why}" in said
    assert "scontrol requeue 42" in calls and "scontrol update JobId=42 ExcNodeList=node2" in calls
    assert "in_allocation" not in state["attempts"][0] and "job 42 requeued" in said
