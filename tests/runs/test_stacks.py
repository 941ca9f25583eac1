"""A hung attempt's stacks: written on request by a rank's thread, shown by status and by logs --stacks."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hpc_train.runs import attempts, stacks, views
from hpc_train.runs.folders import JobRecord
from hpc_train.runs.views import RunFiles, SlurmView

HUNG = {"action": "retried", "attempt": 1, "kind": "hung", "cause": "hung: no progress on any rank for 3 min",
        "after": "it hung: no progress on any rank for 3 min", "excluded": []}


def stuck_here(run_dir: Path) -> None:
    stacks.request_stacks(run_dir, 1)
    deadline = time.monotonic() + 10
    while not stacks.stacks_file(run_dir, 1, 3).exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_ranks_thread_answers_a_request_with_every_threads_stack(tmp_path: Path) -> None:
    stacks.answer_requests(tmp_path, {"SLURM_PROCID": "3"})
    stuck_here(tmp_path)
    dump = stacks.stacks_file(tmp_path, 1, 3).read_text()
    assert dump.startswith("rank 3, attempt 1, pid ")
    assert "in stuck_here" in dump and "in answer" in dump  # the main thread's and the answering thread's


def test_status_shows_that_the_attempt_hung_and_where_rank_0_was(tmp_path: Path) -> None:
    attempts.record(tmp_path, HUNG)
    (tmp_path / "stacks").mkdir()
    stacks.stacks_file(tmp_path, 1, 0).write_text(
        'rank 0, attempt 1\nThread 0x1 (most recent call first):\n  File "/h/hpc_train/runs/stacks.py", line 70 in answer\n\n'
        'Thread 0x2 (most recent call first):\n  File "task.py", line 5 in wait_for_the_file_server\n'
        '  File "task.py", line 9 in _batches\n')
    run = views.read_run(tmp_path)
    record = JobRecord(job_id="17", name="t", folder=str(tmp_path), nodes=2, tasks=2, strategy="multiworker",
                       submitted=0.0)
    lines = views.job_lines(record, SlurmView("COMPLETED", "0:0", "1", 1, "sacct", ended=True), run, None, 3)
    at = lines.index("  history: attempt 2 of 4: retried after it hung: no progress on any rank for 3 min")
    assert lines[at + 1:at + 4] == [
        "  stacks:  rank 0 (attempt-1-rank-0.txt, innermost first; all: hpc-train logs 17 --stacks)",
        '    File "task.py", line 5 in wait_for_the_file_server', '    File "task.py", line 9 in _batches']
    plain = views.job_lines(record, SlurmView("RUNNING", "", "1", 0, "sacct"), RunFiles(), None, 3)
    assert not any("stacks" in line for line in plain)


def test_logs_stacks_prints_each_file_or_says_there_are_none(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from hpc_train.cli.logs import print_stacks

    record = JobRecord(job_id="17", name="t", folder=str(tmp_path), nodes=1, tasks=2, strategy="multiworker",
                       submitted=0.0)
    print_stacks(record)
    assert capsys.readouterr().out == "job 17: no stacks recorded (they are, for every rank, when an attempt hangs)\n"
    (tmp_path / "stacks").mkdir()
    for rank in (1, 0):
        stacks.stacks_file(tmp_path, 2, rank).write_text(f"rank {rank}\n")
    print_stacks(record)
    out = capsys.readouterr().out
    assert out.index("attempt-2-rank-0.txt <==\nrank 0\n") < out.index("attempt-2-rank-1.txt <==\nrank 1\n")
