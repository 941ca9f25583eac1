"""Why a step failed, and whether a retry could help: from srun's lines, the ranks' notes and lost nodes."""

from __future__ import annotations

import pytest

from hpc_train.injob.failures import diagnose, task_ends

KILLED_THEN_TERMINATED = """hpc-train: job 7 on node[1-2]
srun: error: node2: task 1: Killed
srun: launch/slurm: _step_signal: Terminating StepId=7.0
srun: error: node1: task 0: Terminated
"""
FROZEN_PEER = """srun: error: node1: task 0: Exited with exit code 69
srun: error: node2: task 1: Killed
"""
LOST_WORKER_1 = {"rank": 0, "node": "node1", "kind": "lost_peer", "lost": "worker 1", "peers": ["node2"]}


def test_srun_lines_are_read_in_order_with_ranges_of_tasks() -> None:
    ends = task_ends("srun: error: node3: tasks 0-1,4: Exited with exit code 2\n" + KILLED_THEN_TERMINATED)
    assert [(end.node, end.task, end.exit_code) for end in ends] == [
        ("node3", 0, 2), ("node3", 1, 2), ("node3", 4, 2), ("node2", 1, None), ("node1", 0, None)]


def test_the_first_task_killed_is_blamed_not_the_peers_ended_after_it() -> None:
    failure = diagnose(137, KILLED_THEN_TERMINATED, [], ())
    assert (failure.kind, failure.cause, failure.after, failure.blame, failure.retryable) == (
        "died", "node2 task 1: Killed", "node2 task 1 was killed", ("node2",), True)


def test_a_frozen_peer_is_blamed_through_the_note_of_the_rank_that_lost_it() -> None:
    failure = diagnose(137, FROZEN_PEER, [LOST_WORKER_1], ())
    assert (failure.kind, failure.cause, failure.blame, failure.retryable) == (
        "lost_peer", "worker 1 stopped answering (on node2)", ("node2",), True)


def test_a_node_down_comes_first() -> None:
    failure = diagnose(137, KILLED_THEN_TERMINATED, [LOST_WORKER_1], ["node3"])
    assert (failure.kind, failure.cause, failure.blame) == ("node_down", "node3 down", ("node3",))


@pytest.mark.parametrize("kind, words", [("task_error", "the task module failed"),
                                         ("refused", "hpc-train refused to go on")])
def test_what_would_fail_again_is_never_retried(kind: str, words: str) -> None:
    note = {"rank": 1, "node": "node2", "kind": kind, "message": "build_model raised ValueError: no\nmore"}
    failure = diagnose(1, KILLED_THEN_TERMINATED, [LOST_WORKER_1, note], ())
    assert not failure.retryable and failure.cause == "node2 task 1: build_model raised ValueError: no"
    assert failure.why_not.startswith(words)


def test_out_of_memory_is_not_retried() -> None:
    log = "srun: error: node2: task 1: Out Of Memory\nslurmstepd: error: Detected 1 oom-kill event(s)\n"
    failure = diagnose(137, log, [], ())
    assert failure.kind == "out_of_memory" and not failure.retryable and "--mem" in failure.why_not


def test_a_plain_exit_is_the_programs_verdict_unless_listed() -> None:
    log = "srun: error: node1: task 0: Exited with exit code 3\n"
    own = diagnose(3, log, [{"rank": 0, "node": "node1", "kind": "exit", "code": 3}], (), command=True)
    assert not own.retryable and "--retry-exit-codes" in own.why_not
    listed = diagnose(3, log, [], (), command=True, retry_exit_codes={3})
    assert listed.retryable and listed.blame == ("node1",)


def test_a_command_killed_by_a_signal_is_retried_through_its_supervisors_note() -> None:
    log = "srun: error: node2: task 1: Exited with exit code 137\n"
    note = {"rank": 1, "node": "node2", "kind": "signal", "signal": "Killed"}
    failure = diagnose(137, log, [note], (), command=True)
    assert (failure.kind, failure.cause, failure.blame, failure.retryable) == (
        "died", "node2 task 1: Killed", ("node2",), True)


def test_without_srun_the_notes_alone_tell_and_without_anything_the_code() -> None:
    assert diagnose(69, "", [LOST_WORKER_1], ()).blame == ("node2",)
    assert diagnose(137, "", [], ()).retryable and diagnose(137, "", [], ()).blame == ()
    assert not diagnose(1, "", [], ()).retryable


def test_a_commands_own_high_exit_code_is_its_verdict_and_tensorflows_memory_words_are_not_slurms() -> None:
    note = {"rank": 0, "node": "node1", "kind": "exit", "code": 255}
    assert not diagnose(255, "srun: error: node1: task 0: Exited with exit code 255\n", [note], (), command=True).retryable
    log = ("0: W tensorflow/core/common_runtime/bfc_allocator.cc: Allocator ran out of memory trying to allocate\n"
           "srun: error: node2: task 1: Killed\n")
    assert diagnose(137, log, [], ()).kind == "died"
