"""A job's own log (its batch script's output) found wherever what submitted it put it, and `logs --job` prints it."""

from __future__ import annotations

from pathlib import Path

from hpc_train.runs.folders import JobRecord
from hpc_train.runs.joblog import job_log, job_log_places
from tests.login.test_submission import hpc_train, mock_slurm


def record(folder: Path, job_id: str, batch_log: str | None = None) -> JobRecord:
    return JobRecord(job_id, "mnist", str(folder), 1, 1, "multiworker", 0.0, None, batch_log=batch_log)


def test_each_way_of_submitting_has_its_own_log_found(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    submitted = record(runs / "mnist-7", "7")  # submit: submitit's files in the run folder
    assert job_log_places(submitted)[:3] == [runs / "mnist-7" / "7_0_log.err", runs / "mnist-7" / "7_0_log.out",
                                             runs / "mnist-7" / "slurm-mnist-7.out"]
    element = record(runs / "mnist-8_2", "8_2")  # a sweep's element, a packed sweep: slurm-FOLDER.out there
    assert runs / "mnist-8_2" / "slurm-mnist-8_2.out" in job_log_places(element)
    rendered = record(runs / "mnist-9", "9")  # sbatch of a rendered script, slurm/*.sh: where sbatch ran
    assert job_log_places(rendered)[-1] == tmp_path / "slurm-mnist-9.out"
    (runs / "mnist-9").mkdir(parents=True)
    assert job_log(rendered) == []
    (tmp_path / "slurm-mnist-9.out").write_text("hpc-train: job 9 ...\n")
    assert job_log(rendered) == [tmp_path / "slurm-mnist-9.out"]
    labelled = record(runs / "mnist-10", "10", batch_log=str(tmp_path / "elsewhere" / "out.txt"))
    assert tmp_path / "elsewhere" / "out.txt" in job_log_places(labelled)


def test_logs_job_prints_a_submitted_jobs_own_lines_not_a_ranks(tmp_path: Path) -> None:
    """(issue 46, 5) a submit job's own lines (start, attempts, retries) landed in JOBID_0_log.err, which no doc
    named and `logs` never showed."""
    fake = mock_slurm(tmp_path / "fake", job_state="COMPLETED")
    assert hpc_train("submit", "--nodes", "1", "--name", "a b", cwd=tmp_path, fake=fake).returncode == 0
    folder = tmp_path / "runs" / "a b-4242"
    none_yet = hpc_train("logs", "4242", "--job", cwd=tmp_path, fake=fake)
    assert none_yet.returncode == 0 and none_yet.stdout.startswith("job 4242: no log of its own yet (looked for ")
    (folder / "logs").mkdir()
    (folder / "logs" / "rank-0.out").write_text("a rank's line\n")
    (folder / "4242_0_log.err").write_text("hpc-train: job 4242 attempt 1 ...\nhpc-train: retrying ...\n")
    shown = hpc_train("logs", "4242", "--job", cwd=tmp_path, fake=fake)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[:3] == ["==> runs/a b-4242/4242_0_log.err <==", "hpc-train: job 4242 attempt "
                                             "1 ...", "hpc-train: retrying ..."]
    assert "a rank's line" not in shown.stdout
