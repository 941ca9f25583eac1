"""A job's own log (its batch script's output) found wherever what submitted it put it, and `logs --job` prints it."""

from __future__ import annotations

from pathlib import Path

from hpc_train.runs.folders import JobRecord
from hpc_train.runs.joblog import job_log, job_log_path, job_log_places, link_job_log
from tests.login.test_submission import hpc_train, mock_slurm


def record(folder: Path, job_id: str, batch_log: str | None = None) -> JobRecord:
    return JobRecord(job_id, "mnist", str(folder), 1, 1, "multiworker", 0.0, None, batch_log=batch_log)


def test_each_way_of_submitting_has_its_own_log_found(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    submitted = record(runs / "mnist-7", "7")  # its one place first, then submitit's own files of an older submit
    assert job_log_places(submitted)[:3] == [runs / "mnist-7" / "slurm-mnist-7.out", runs / "mnist-7" / "7_0_log.err",
                                             runs / "mnist-7" / "7_0_log.out"]
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


def test_a_log_slurm_writes_elsewhere_is_linked_into_its_one_place_and_shown_once(tmp_path: Path) -> None:
    """(issue 46, 5) one place for a job's own log, whatever submitted it: a script given to sbatch without its
    folder has Slurm write where sbatch ran; the job links that file into its run folder as it starts."""
    folder = tmp_path / "runs" / "mnist-9"
    folder.mkdir(parents=True)
    written = tmp_path / "slurm-mnist-9.out"
    written.write_text("hpc-train: job 9 on node1, 1 task\n")
    assert not link_job_log(folder, None) and not link_job_log(folder, "slurm-mnist-9.out")  # (a relative one: not)
    assert link_job_log(folder, str(written))
    assert job_log_path(folder).read_text() == "hpc-train: job 9 on node1, 1 task\n"
    assert job_log(record(folder, "9")) == [job_log_path(folder)]  # the link, not the file again by its old place
    assert link_job_log(folder, str(tmp_path / "other.out")) and job_log_path(folder).resolve() == written
    own = tmp_path / "runs" / "mnist-10"
    own.mkdir()
    job_log_path(own).write_text("written there by Slurm\n")  # submit's jobs: Slurm writes it there itself
    assert link_job_log(own, str(written)) and not job_log_path(own).is_symlink()
