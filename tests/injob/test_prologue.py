"""Before each attempt: a restart nobody recorded is explained (a node lost), and spent retries end the job."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.injob import body
from hpc_train.injob.body import JobBody
from hpc_train.runs import attempts
from hpc_train.injob.prologue import failed_nodes, previous_attempt_log, slurms_restart, unexplained_restarts
from tests.fake_slurm import without_slurm

LOG = """hpc-train: job 12 on node[1-2]; results in runs/x-12
srun: error: Node failure on node2
hpc-train: job 12 (restart 1) on node[1-2]; results in runs/x-12
"""


def test_a_restart_is_unexplained_until_an_entry_accounts_for_it() -> None:
    assert unexplained_restarts(1, []) == 1
    assert unexplained_restarts(1, [{"action": "retried"}]) == 0
    assert unexplained_restarts(3, [{"action": "requeued"}, {"action": "requeued by Slurm", "restarts": 2}]) == 0
    assert unexplained_restarts(2, [{"action": "failed"}]) == 2


def test_the_node_lost_in_the_last_attempt_is_found_in_its_log_or_by_its_state() -> None:
    last = previous_attempt_log(LOG + "hpc-train: job 123 (restart 1)\n", "12")
    assert "Node failure on node2" in last and "(restart 1)" not in last
    assert failed_nodes(last, ["node1", "node2"], set()) == ["node2"]
    assert failed_nodes("", ["node1", "node3"], {"node3", "node7"}) == ["node3"]
    entry = slurms_restart(["node2"], 5.0)
    assert (entry["action"], entry["cause"]) == ("requeued by Slurm", "node2 down")
    assert slurms_restart([], 5.0)["action"] == "restarted"


def run_prologue(tmp_path: Path, restarts: str, history: list[dict],
                 capsys: pytest.CaptureFixture[str]) -> tuple[int | None, str]:
    """The job body's prologue: None when the step runs, else the job's exit code; and what it said."""
    run_dir = tmp_path / "run 'dir'; touch PWNED"
    run_dir.mkdir(exist_ok=True)
    for entry in history:
        attempts.record(run_dir, entry)
    ended = body.prologue(JobBody(run_dir, max_retries=2),
                          {**without_slurm(), "SLURM_JOB_ID": "12", "SLURM_RESTART_COUNT": restarts})
    return ended, capsys.readouterr().err


def test_the_job_goes_on_after_a_retry_and_ends_once_retries_are_spent(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    retried = {"action": "retried", "cause": "node2 task 1: Killed", "after": "node2 task 1 was killed",
               "attempt": 1, "excluded": ["node2"]}
    going_on, said = run_prologue(tmp_path, "1", [retried], capsys)
    assert going_on is None  # the step runs
    assert "attempt 2 of 3: retried after node2 task 1 was killed; node2 excluded" in said
    lost = {"action": "requeued by Slurm", "cause": "node3 down", "after": "node3 went down", "attempt": 2}
    spent, said = run_prologue(tmp_path, "3", [retried, lost, lost], capsys)  # a third failure, max_retries 2
    assert spent == 1 and "retries exhausted (2 of 2)" in said
    assert not list(tmp_path.rglob("PWNED"))


def test_a_prologue_that_fails_by_itself_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    def broken(*args: object) -> int:
        raise OSError("disk gone")

    monkeypatch.setattr("hpc_train.injob.prologue.before_the_step", broken)
    assert body.prologue(JobBody(tmp_path), {"SLURM_JOB_ID": "12"}) is None  # the step runs
    assert "warning: the prologue failed (OSError: disk gone)" in capsys.readouterr().err


def test_outside_slurm_there_is_no_prologue(tmp_path: Path) -> None:
    assert body.prologue(JobBody(tmp_path / "run"), {}) is None and not (tmp_path / "run").exists()


def test_a_new_attempt_is_starting_not_the_last_ones_requeued(tmp_path: Path) -> None:
    import json

    from hpc_train.injob.prologue import before_the_step
    from hpc_train.runs.state import write_state

    write_state(tmp_path, "requeued", global_step=40, max_retries=1)
    attempts.record(tmp_path, attempts.requeue_entry(1, 40))
    assert before_the_step(tmp_path, {"SLURM_RESTART_COUNT": "1", "SLURM_JOB_NODELIST": "n[1-2]"}, None) == 0
    state = json.loads((tmp_path / "state.json").read_text())
    assert (state["state"], state["max_retries"], state["attempt"]["number"]) == ("starting", 1, 2)


def test_the_log_says_why_an_attempt_of_a_range_has_its_size() -> None:
    from hpc_train.injob.prologue import size_reason

    assert size_reason(4, 4, [], [], 4) == "all 4 it may use were free"
    assert size_reason(2, 4, [], [], 4) == ("the partition's other nodes were busy with other jobs (Slurm gave what "
                                            "was free, never below MIN)")
    assert size_reason(3, 4, ["node1"], [], 3) == ("node1 excluded; no other node of the partition "
                                                   "can take it (Slurm gave what was free, never below MIN)")
    assert "node2 down or drained" in size_reason(2, 4, [], ["node2"], 3)


def test_the_nodes_a_retry_gave_back_in_its_allocation_count_as_excluded() -> None:
    from hpc_train.injob.prologue import released_here

    history = [{"action": "retried", "in_allocation": True, "released": ["node2"]}, {"action": "requeued"},
               {"action": "retried", "excluded": ["node3"]}]
    assert released_here(history) == {"node2"}  # (node3 is in Slurm's ExcNodeList: a requeue set it)
