"""The start-up and submit reports: ratios against their baselines, paired by repetition."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.bench import startup, submit
from hpc_train.errors import HpcTrainError
from tests.fake_slurm import FakeSlurm


def test_startup_reports_each_run_against_import_tensorflow() -> None:
    samples = {name: [2.0, 4.0, 3.0] for name in startup.contestants(Path("/data"))}
    samples[startup.BASELINE] = [1.0, 2.0, 1.5]
    text = startup.render(samples)
    assert "| `python -c \"import tensorflow\"` | 1.50 | 1.00-2.00 | 1.00 | 1.00-1.00 |" in text
    assert text.count("| 3.00 | 2.00-4.00 | 2.00 | 2.00-2.00 |") == len(samples) - 1


def test_submit_reports_running_latency_against_sbatch() -> None:
    samples = {submit.SBATCH_RUNNING: [1.0, 1.2], submit.SUBMIT_RUNNING: [1.1, 1.5],
               submit.SBATCH_HELD: [0.005, 0.005], submit.SUBMIT_HELD: [0.1, 0.2], submit.PYTHON: [0.02, 0.02]}
    text = submit.render(samples)
    assert f"| {submit.SUBMIT_RUNNING} | 1,300 | 1,100-1,500 | 1.18 | 1.10-1.25 |" in text
    assert f"| {submit.SUBMIT_HELD} | 150 | 100-200 | 30.00 | 20.00-40.00 |" in text


def test_a_job_that_leaves_the_queue_without_running_is_an_error_not_a_wait(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSlurm(tmp_path / "fake", {"sbatch": "Submitted batch job 7\n", "squeue": "", "scancel": ""})
    monkeypatch.setenv("PATH", fake.install(tmp_path / "bin")["PATH"])
    with pytest.raises(HpcTrainError, match=r"job 7 did not start running \(gone from the queue\)"):
        submit.until_running(["sbatch", "job.sbatch"], tmp_path)
    assert fake.lines("scancel") == ["scancel 7"]
