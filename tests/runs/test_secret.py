"""The job's secret: made once per run folder, mode 0600 in a folder of 0700; read back only when it is safe."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from hpc_train.errors import HpcTrainError
from hpc_train.runs.secret import SECRET_BYTES, SECRET_ENV, SECRET_FILE, ensure_secret, job_secret, secret_environ


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_secret_is_made_private_once_and_kept_for_the_next_attempt(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "job-42"
    environ = secret_environ(run_dir)
    path = Path(environ[SECRET_ENV])
    assert path == (run_dir / SECRET_FILE).resolve()
    assert mode(path) == 0o600 and mode(run_dir) & 0o077 == 0  # (the umask may take more, never add)
    secret = job_secret(environ)
    assert secret is not None and len(secret) == SECRET_BYTES
    assert ensure_secret(run_dir) == run_dir / SECRET_FILE and job_secret(environ) == secret  # a requeue's
    assert job_secret(secret_environ(tmp_path / "runs" / "job-43")) != secret  # each job its own


def test_no_variable_no_secret() -> None:
    assert job_secret({}) is None


def test_a_link_is_never_written_through(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text("mine\n")
    (tmp_path / SECRET_FILE).symlink_to(tmp_path / "elsewhere")
    ensure_secret(tmp_path)
    assert (tmp_path / "elsewhere").read_text() == "mine\n"
    with pytest.raises(HpcTrainError, match="cannot read the job's secret"):
        job_secret({SECRET_ENV: str(tmp_path / SECRET_FILE)})


@pytest.mark.parametrize("content, file_mode, problem", [
    ("ab" * SECRET_BYTES, 0o640, r"can be read by others \(mode 0640\)"),
    ("ab" * 4, 0o600, "is not 32 bytes of hex"),
    ("not hex at all", 0o600, "is not 32 bytes of hex"),
])
def test_an_unsafe_or_broken_secret_is_refused_without_showing_it(tmp_path: Path, content: str, file_mode: int,
                                                                    problem: str) -> None:
    path = tmp_path / SECRET_FILE
    path.write_text(content)
    path.chmod(file_mode)
    with pytest.raises(HpcTrainError, match=problem) as refused:
        job_secret({SECRET_ENV: str(path)})
    assert content not in str(refused.value) and "\n" not in str(refused.value)


def test_a_missing_file_is_one_line_naming_the_fix(tmp_path: Path) -> None:
    with pytest.raises(HpcTrainError, match=r"cannot read the job's secret .* \(No such file or directory\); the "
                                            "run folder must be on a file system every node"):
        job_secret({SECRET_ENV: str(tmp_path / "gone")})


def test_a_folder_where_the_secret_cannot_be_made_is_a_warning(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "job").write_text("a file where the run folder should be\n")
    assert secret_environ(tmp_path / "job") == {}  # the ranks check in without one
    assert "cannot make the job's secret" in capsys.readouterr().err


def test_run_folders_are_made_and_kept_the_users_alone(tmp_path: Path) -> None:
    from hpc_train.runs.folders import JobRecord
    from hpc_train.runs.secret import narrow_to_user

    record = JobRecord("7", "job", str(tmp_path / "runs" / "job-7"), 1, 1, "multiworker", 0.0)
    record.write()
    assert mode(Path(record.folder)) & 0o077 == 0
    made_elsewhere = tmp_path / "runs" / "job-8"  # as submitit makes its folder
    made_elsewhere.mkdir()
    made_elsewhere.chmod(0o755)
    narrow_to_user(made_elsewhere)
    assert mode(made_elsewhere) == 0o700
