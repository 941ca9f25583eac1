"""--nodes MIN-MAX on render and submit: bad ranges refused in one line, nothing written or queued."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli.running import run_main


@pytest.mark.parametrize("args, said", [
    (["--nodes", "4-2"], "--nodes 4-2: MIN 4 is more than MAX 2; write the range as 2-4"),
    (["--nodes", "0-2"], "--nodes 0-2: a job needs at least 1 node"),
    (["--nodes", "2-4", "--set", "global_batch=256"], "--nodes 2-4: a global batch of 256 cannot be shared by the 3 "
                                                      "replicas of 3 node(s)"),
    ([], "--nodes N (or MIN-MAX) is required"),
])
def test_a_bad_range_is_one_line_and_nothing_is_written(args: list[str], said: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "job.sbatch"
    code, _, err = run_main(["render", "-o", str(output), *args], capsys)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err
    assert not output.exists()


def test_a_local_range_beyond_this_machine_is_refused_and_nothing_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    least = (os.cpu_count() or 1) + 1
    code, _, err = run_main(["submit", "--local", "--nodes", f"{least}-{least + 1}"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"cannot hold MIN {least} node(s) of 1 task(s); lower MIN, or drop --local" in err
    assert not (tmp_path / "runs").exists()


def test_a_range_renders_as_min_max_with_its_global_batch_and_the_yaml_may_give_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "job.yaml"
    config.write_text("batch_size: 60\njob:\n  nodes: 2-4\n")
    output = tmp_path / "job.sbatch"
    code, _, err = run_main(["render", "--config", str(config), "-o", str(output)], capsys)
    assert code == 0, err
    text = output.read_text()
    assert "#SBATCH --nodes=2-4\n" in text and "--ntasks-per-node" not in text.split("set -euo")[0]
    assert "global_batch: 240\n" in text and "--node-range 2-4" in text
    code, _, err = run_main(["render", "--config", str(config), "--nodes", "3", "-o", str(output)], capsys)
    assert code == 0 and "#SBATCH --nodes=3\n" in output.read_text() and "global_batch: null" in output.read_text()


def test_a_range_with_the_default_batch_renders_with_its_batch_rounded_up_and_one_note(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "job.sbatch"
    code, _, err = run_main(["render", "--nodes", "2-4", "-o", str(output)], capsys)
    assert code == 0, err
    assert "global_batch: 264\n" in output.read_text()  # the default 64 x 4 = 256 is not shared by 3 nodes
    [note] = [line for line in err.splitlines() if "note:" in line]
    assert note == ("hpc-train: note: --nodes 2-4: the global batch is 264, not 64 x 4 replicas, so that every size "
                    "shares it evenly (per replica: 132 on 2, 88 on 3, 66 on 4 node(s)); --set global_batch=N "
                    "chooses it")
