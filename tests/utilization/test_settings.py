"""The sampling settings from the job's environment: defaults, each setting, off, and bad values in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.errors import HpcTrainError
from hpc_train.utilization.settings import Sampling


def test_the_defaults_sample_every_10_s_and_name_a_gpu_under_5_percent_for_5_minutes() -> None:
    assert Sampling.from_environment({}) == Sampling(10.0, 5.0, 300.0)
    assert Sampling.from_environment({}).on


def test_each_setting_and_zero_seconds_turning_sampling_off() -> None:
    said = Sampling.from_environment({"HPC_TRAIN_SAMPLE_SECONDS": "2.5", "HPC_TRAIN_IDLE_PERCENT": "10",
                                      "HPC_TRAIN_IDLE_MINUTES": "0.5"})
    assert said == Sampling(2.5, 10.0, 30.0)
    assert not Sampling.from_environment({"HPC_TRAIN_SAMPLE_SECONDS": "0"}).on


def test_the_ledgers_switch_turns_sampling_off_too() -> None:
    assert not Sampling.from_environment({"HPC_TRAIN_LEDGER": "0", "HPC_TRAIN_SAMPLE_SECONDS": "2"}).on
    assert Sampling.from_environment({"HPC_TRAIN_LEDGER": "1"}).on


@pytest.mark.parametrize("name, value, expected", [
    ("HPC_TRAIN_SAMPLE_SECONDS", "often", "HPC_TRAIN_SAMPLE_SECONDS='often': expected seconds between samples, 0 to "
                                          "turn sampling off; unset it for the default (10)"),
    ("HPC_TRAIN_IDLE_MINUTES", "-1", "HPC_TRAIN_IDLE_MINUTES='-1': expected minutes, e.g. 5; unset it for the "
                                     "default (5)"),
    ("HPC_TRAIN_IDLE_PERCENT", "nan", "HPC_TRAIN_IDLE_PERCENT='nan': expected a percentage, e.g. 5; unset it for "
                                      "the default (5)"),
    ("HPC_TRAIN_IDLE_PERCENT", "150", "HPC_TRAIN_IDLE_PERCENT=150: expected a percentage, 0 to 100"),
])
def test_a_bad_value_is_one_line_naming_it_and_the_fix(name: str, value: str, expected: str) -> None:
    with pytest.raises(HpcTrainError) as raised:
        Sampling.from_environment({name: value})
    assert str(raised.value) == expected


def test_submit_refuses_a_bad_setting_before_anything_is_queued(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from tests.cli.running import run_main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HPC_TRAIN_IDLE_MINUTES", "soon")
    code, out, err = run_main(["submit", "--nodes", "1", "--local", "--no-snapshot", "--", "true"], capsys)
    assert code == 2 and out == ""
    assert err == ("hpc-train submit: error: HPC_TRAIN_IDLE_MINUTES='soon': expected minutes, e.g. 5; unset it for "
                   "the default (5)\n")
    assert not (tmp_path / "runs").exists()
