"""The one epilogue every batch script runs after a failed step: the job's exit code, decided once."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from hpc_train.jobs.epilogue import job_exit_code, main, read_state, shell_lines

FINISHED = {"state": "finished"}


@pytest.mark.parametrize("code, strategy, state, expected", [
    (137, "parameter_server", FINISHED, 0),  # a worker died after the chief finished: the work is done
    (137, "parameter_server", {"state": "running"}, 137),
    (137, "multiworker", FINISHED, 137),  # a lost MultiWorkerMirrored worker is never waved through
    (0, "parameter_server", FINISHED, 0),
    (2, "parameter_server", {}, 2),
])
def test_the_jobs_code_after_its_step(code: int, strategy: str, state: dict, expected: int) -> None:
    final, warning = job_exit_code(code, strategy, state)
    assert final == expected
    assert (warning is not None) == (code != 0 and final == 0)


def test_a_missing_or_damaged_state_file_reads_as_nothing(tmp_path: Path) -> None:
    assert read_state(tmp_path) == {}
    (tmp_path / "state.json").write_text("{half")
    assert read_state(tmp_path) == {}
    (tmp_path / "state.json").write_text("[1, 2]")
    assert read_state(tmp_path) == {}


def test_wrong_arguments_are_one_usage_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["x", "dir"]) == 2
    assert capsys.readouterr().err.startswith("usage: hpc-train epilogue STEP_EXIT_CODE RUN_DIR STRATEGY")


@pytest.mark.parametrize("python, finished, expected", [
    (shlex.quote(sys.executable), True, 0),
    (shlex.quote(sys.executable), False, 137),
    ("/no/such/python3", True, 137),  # an epilogue that cannot start changes nothing: the step's code stands
])
def test_the_shell_lines_run_it_only_after_a_failure(python: str, finished: bool, expected: int,
                                                       tmp_path: Path) -> None:
    run_dir = tmp_path / "run dir; touch PWNED"
    run_dir.mkdir()
    if finished:
        (run_dir / "state.json").write_text('{"state": "finished"}')
    script = "\n".join(["(exit 137)", *shell_lines(python, shlex.quote(str(run_dir)), "parameter_server")])
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == expected, result.stderr
    assert not list(tmp_path.rglob("PWNED"))


def test_the_batch_scripts_run_it_as_a_hidden_hpc_train_verb(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hpc_train.cli import main as cli

    (tmp_path / "state.json").write_text('{"state": "finished"}')
    assert cli(["epilogue", "137", str(tmp_path), "parameter_server"]) == 0
    assert cli(["epilogue", "137", str(tmp_path), "multiworker"]) == 137
    assert "but the chief finished training" in capsys.readouterr().err
    cli_help = subprocess.run([sys.executable, "-m", "hpc_train", "--help"], capture_output=True, text=True)
    assert "epilogue" not in cli_help.stdout  # not for people
