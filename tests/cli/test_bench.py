"""`hpc-train bench`: starts without TensorFlow, and refuses what it cannot do in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.running import run_main


def test_bench_help_lists_every_benchmark_without_importing_tensorflow() -> None:
    code = ("import sys; from hpc_train.cli import main\n"
            "try:\n    main(['bench', '--help'])\nexcept SystemExit:\n    pass\n"
            "assert 'tensorflow' not in sys.modules, 'imported TensorFlow'")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    for name in ("trainer", "startup", "scaling", "bootstrap", "submit", "faults", "search", "all"):
        assert name in result.stdout


def test_a_report_without_measurements_is_one_line_and_exit_2(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["bench", "scaling", "--report-only", "--results", str(tmp_path / "none.json")], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "cannot read measurements" in err and "run `hpc-train bench scaling` first" in err


@pytest.mark.parametrize("benchmark", ["scaling", "submit", "faults"])
def test_without_slurm_a_slurm_benchmark_says_how_to_get_one(benchmark: str, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("SLURM_CONF", raising=False)
    code, _, err = run_main(["bench", benchmark], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "hpc-train cluster up" in err
