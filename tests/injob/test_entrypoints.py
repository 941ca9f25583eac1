"""injob/entrypoints.py: what submitit pickles is the job body itself, and its outcome is the job's."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import cloudpickle
import pytest

from hpc_train.config import TrainConfig
from hpc_train.injob.entrypoints import JobEnded
from hpc_train.login.plan import JobPlan
from hpc_train.spec.request import JobSpec
from hpc_train.login.submission import job_call


def called(plan: JobPlan, monkeypatch: pytest.MonkeyPatch, job_id: str) -> int:
    """The callable as submitit's job runs it: unpickled, in a batch shell's environment (no srun here: the body
    starts its step on the mock launcher)."""
    for name in [name for name in os.environ if name.startswith("SLURM_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("SLURM_JOB_ID", job_id)
    tools = plan.runs.parent / "bin"
    tools.mkdir(exist_ok=True)
    (tools / "sh").symlink_to("/bin/sh")
    monkeypatch.setenv("PATH", f"{tools}:{Path(sys.executable).parent}")  # (no srun on it)
    return cloudpickle.loads(cloudpickle.dumps(job_call(plan)))()


def test_the_callable_runs_the_body_once_and_returns_its_exit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    plan = JobPlan(JobSpec(nodes=1, name="ok"), TrainConfig(epochs=2), runs=tmp_path / "runs",
                   command=("sh", "-c", 'echo "rank $HPC_TRAIN_RUN_DIR" >> "$HPC_TRAIN_RUN_DIR/ran"'))
    assert called(plan, monkeypatch, "77") == 0
    folder = tmp_path / "runs" / "ok-77"
    assert (folder / "ran").read_text() == f"rank {folder}\n"  # one rank, once
    assert "epochs: 2\n" in (folder / "config.yaml").read_text()
    assert (folder / "logs").is_dir() and (folder / "job.json").is_file()  # (srun's --output: logs/rank-N.out)


def test_a_failed_job_is_an_error_whose_code_is_the_processs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    plan = JobPlan(JobSpec(nodes=1, name="bad"), TrainConfig(max_retries=0), runs=tmp_path / "runs",
                   command=("sh", "-c", "exit 3"))
    with pytest.raises(JobEnded) as ended:
        called(plan, monkeypatch, "78")
    assert ended.value.code == 3 and isinstance(ended.value, Exception)  # (submitit keeps it as the result's error)
    assert str(ended.value) == "hpc-train's job body ended with exit code 3"
