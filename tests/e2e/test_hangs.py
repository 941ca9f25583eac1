"""A hang every rank shares, on a real Slurm: the job's watchdog records the stacks, ends the attempt, and the
retry completes the run."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from hpc_train.localslurm.spec import LocalCluster
from tests.e2e.test_task_modules import submit
from tests.training.tasks import HANGING_ONCE

pytestmark = [pytest.mark.slurm_cluster, pytest.mark.tensorflow]
TASK = HANGING_ONCE


def test_a_hang_on_every_rank_is_ended_with_its_stacks_and_retried_to_completion(cluster: LocalCluster,
                                                                                  tmp_path: Path) -> None:
    started = time.monotonic()
    job = submit(cluster, tmp_path, "hang", "--task", str(TASK), "--set", "hang_minutes=1", "--set", "epochs=3",
                 "--set", "steps_per_epoch=32", "--set", "batch_size=8", "--set", "steps_per_execution=4")
    assert job.wait(timeout=480) == ("COMPLETED", "0:0"), job.log(0, "err")[-3000:]
    # The hang (after epoch 1 and a bit), a minute of it, the stacks, the retry: minutes, not the time limit.
    assert time.monotonic() - started < 6 * 60
    log = job.log(0, "err")
    assert "hpc-train: hung: no progress on any rank for 1 min: recording every rank's stacks" in log, log[-3000:]
    assert re.search(r"hpc-train: attempt 2 of 4: retried after it hung: no progress on any rank for 1 min; "
                     r"resumed at step \d+", log), log[-3000:]
    assert [epoch["epoch"] for epoch in job.metrics()["epochs"]] == [1, 2, 3]
    for rank in (0, 1):
        dump = (job.folder / "stacks" / f"attempt-1-rank-{rank}.txt").read_text()
        assert "in wait_for_the_file_server" in dump, dump
    # status: the attempt that hung, and where rank 0 was; logs --stacks: every rank's.
    status = subprocess.run(["hpc-train", "status", job.id], cwd=tmp_path, env=job.env, capture_output=True,
                            text=True).stdout
    assert "history: attempt 2 of 4: retried after it hung" in status, status
    assert re.search(r"stacks:  rank 0 \(attempt-1-rank-0\.txt.*\n.*hanging_once\.py\", line \d+ in "
                     r"wait_for_the_file_server", status), status
    shown = subprocess.run(["hpc-train", "logs", job.id, "--stacks"], cwd=tmp_path, env=job.env,
                           capture_output=True, text=True).stdout
    assert shown.count("in wait_for_the_file_server") == 2, shown
