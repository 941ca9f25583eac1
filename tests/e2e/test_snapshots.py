"""The code a submitted job runs, on a real Slurm: the snapshot taken at submit time, whatever is on disk when
Slurm requeues it (issue 29). What goes into a snapshot and how a script starts in it: tests/login/test_snapshot.py.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from hpc_train.localslurm.spec import LocalCluster
from tests.e2e.jobs import FINAL_STATES
from tests.e2e.test_task_modules import submit

pytestmark = pytest.mark.slurm_cluster
# Says which code it is; its first attempt waits to be requeued, the next one ends.
TRAIN = """import os, time
restart = os.environ.get("SLURM_RESTART_COUNT", "0")
print("code {version}, restart", restart, "in", os.getcwd(), flush=True)
if restart == "0":
    time.sleep(300)
"""


def test_a_job_requeued_after_the_user_edited_the_code_runs_the_code_submitted(cluster: LocalCluster,
                                                                            tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN.format(version="submitted"))
    job = submit(cluster, tmp_path, "edited", "--", "python", "train.py")
    deadline = time.monotonic() + 120
    while "restart 0" not in job.log(0):
        assert time.monotonic() < deadline and job.state()[0] not in FINAL_STATES, job.log(0, "err")
        time.sleep(0.3)
    (tmp_path / "train.py").write_text(TRAIN.format(version="edited"))  # while the job runs
    # Slurm refuses a requeue while the job is still being launched ("Job is pending execution"): try again.
    while subprocess.run(["scontrol", "requeue", job.id], env=job.env, capture_output=True).returncode != 0:
        assert time.monotonic() < deadline, "scontrol requeue was refused for 120 s"
        time.sleep(0.5)
    assert job.wait() == ("COMPLETED", "0:0"), job.log(0, "err")
    provenance = json.loads((job.folder / "provenance.json").read_text())
    workdir = provenance["snapshot"]["workdir"]
    assert f"code submitted, restart 1 in {workdir}" in job.log(0) and "code edited" not in job.log(0), job.log(0)
    assert Path(workdir).parent.parent == tmp_path / "runs" / "snapshots" and provenance["submit_dir"] == str(tmp_path)
