"""A sweep submitted as one job array, and followed: submit, status, list, logs and cancel, on a mock Slurm."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from hpc_train.slurm.follow import parse_array_states
from tests.fake_slurm import FakeSlurm, Reply, without_slurm


def test_squeue_lines_of_an_array_give_each_elements_state() -> None:
    text = "12_0 COMPLETED\n12_1 RUNNING\n12_[2-3,5%2] PENDING\n13_0 RUNNING\n12 PENDING\n"
    assert parse_array_states(text, "12") == {0: "COMPLETED", 1: "RUNNING", 2: "PENDING", 3: "PENDING",
                                              5: "PENDING"}


def mock_array_slurm(folder: Path) -> FakeSlurm:
    """sbatch answers array 4242 (the fake keeps the script); squeue shows its elements; no accounting."""
    return FakeSlurm(folder, {
        "sbatch": "4242\n",
        "squeue": "4242_0 COMPLETED\n4242_1 RUNNING\n4242_[2-3%2] PENDING\n",
        "sacct": Reply(stderr="sacct: error: Slurm accounting storage is disabled\n", code=1),
        "scontrol": "JobId=4242 JobState=RUNNING\n",
        "sinfo": "",
        "scancel": "",
    })


def hpc_train(*args: str, cwd: Path, fake: FakeSlurm) -> subprocess.CompletedProcess[str]:
    path = fake.install(cwd / "bin")["PATH"]
    return subprocess.run([sys.executable, "-m", "hpc_train", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**without_slurm(), "PATH": path})


def test_a_sweep_is_one_array_whose_elements_are_followed_one_by_one(tmp_path: Path) -> None:
    fake = mock_array_slurm(tmp_path / "fake")
    sweep = ["--sweep", "learning_rate=0.01,0.001", "--sweep", "seed=1,2", "--max-parallel", "2"]
    shown = hpc_train("submit", "--nodes", "2", "--name", "sw", *sweep, "--dry-run", cwd=tmp_path, fake=fake)
    assert shown.returncode == 0, shown.stderr
    assert "INDEX  learning_rate  seed" in shown.stdout and "#SBATCH --array=0-3%2" in shown.stdout
    assert not fake.scripts() and not (tmp_path / "runs").exists()
    submitted = hpc_train("submit", "--nodes", "2", "--name", "sw", *sweep, cwd=tmp_path, fake=fake)
    assert submitted.returncode == 0, submitted.stderr
    assert submitted.stdout == "4242\n"  # the id alone on stdout (issue 27, 10)
    [script] = fake.scripts()
    assert "#SBATCH --array=0-3%2" in script
    # Each element's batch log in its own run folder, not slurm-sw-4242_I.out in the submit directory (issue 27,
    # 11): submitted held, released once the folders Slurm opens the logs in are there.
    # (On sbatch's command line, over the script's: the script is render's, byte for byte, login/plan.py.)
    [call] = [call for call in fake.calls("sbatch") if call.script]
    assert f"--output={tmp_path / 'runs' / '%x-%A_%a' / 'slurm-%x-%A_%a.out'}" in call.args
    assert [call.args[:2] for call in fake.calls("sbatch") if call.script] == [["--parsable", "--hold"]]
    assert [line for line in fake.lines("scontrol") if " release " in line] == ["scontrol release 4242"]
    record = json.loads((tmp_path / "runs" / "sw-4242" / "job.json").read_text())
    assert record["sweep"] == "4242" and record["elements"][3] == {"learning_rate": 0.001, "seed": 2}
    assert (tmp_path / "runs" / "sw-4242" / "sweep.sbatch").read_text() == script
    assert sorted(path.name for path in (tmp_path / "runs").iterdir()) == [
        "snapshots", "sw-4242", "sw-4242_0", "sw-4242_1", "sw-4242_2", "sw-4242_3"]
    # One code snapshot for the whole array: every element starts in it and records it.
    [snapshot] = (tmp_path / "runs" / "snapshots").iterdir()
    assert f"cd {snapshot / 'files'} ||" in script
    assert {json.loads((tmp_path / "runs" / f"sw-4242_{index}" / "provenance.json").read_text())["snapshot"]["digest"]
            for index in range(4)} == {snapshot.name}
    element = tmp_path / "runs" / "sw-4242_0"
    (element / "metrics.json").write_text(json.dumps({"config": {"epochs": 3}, "epochs": [
        {"epoch": 1, "val_loss": 0.3, "val_accuracy": 0.91}, {"epoch": 2, "val_loss": 0.2, "val_accuracy": 0.95}]}))
    status = hpc_train("status", "4242", cwd=tmp_path, fake=fake)
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert lines[0] == "sweep 4242 (sw): 4 elements: 2 pending, 1 completed, 1 running"
    assert lines[1].split() == ["INDEX", "learning_rate", "seed", "STATE", "EPOCH", "LAST", "VALIDATION", "RETRIES"]
    assert lines[2].split() == ["0", "0.01", "1", "completed", "2/3", "val_accuracy", "0.9500", "0"]
    assert lines[5].split() == ["3", "0.001", "2", "pending", "-", "-", "0"]
    listed = hpc_train("list", cwd=tmp_path, fake=fake).stdout.splitlines()
    assert len(listed) == 2 and listed[1].startswith("4242") and "sweep: 2 pending, 1 completed, 1 running" in listed[1]
    (element / "logs").mkdir()
    (element / "logs" / "rank-1.out").write_text("element 0, rank 1\n")
    assert hpc_train("logs", "4242_0", "--rank", "1", cwd=tmp_path, fake=fake).stdout == "element 0, rank 1\n"
    (element / "logs" / "rank-0.out").write_text("".join(f"line {number}\n" for number in range(1, 9)))
    tails = hpc_train("logs", "4242", cwd=tmp_path, fake=fake)  # the sweep's id: each element's last lines
    assert tails.returncode == 0 and tails.stdout.splitlines() == [
        "== 4242_0 (learning_rate=0.01, seed=1): runs/sw-4242_0/logs/rank-0.out, last 5 lines",
        "line 4", "line 5", "line 6", "line 7", "line 8",
        "== 4242_1 (learning_rate=0.01, seed=2): no log yet (pending?)",
        "== 4242_2 (learning_rate=0.001, seed=1): no log yet (pending?)",
        "== 4242_3 (learning_rate=0.001, seed=2): no log yet (pending?)",
        "(the whole log of one element: hpc-train logs 4242_I [--rank R])"]
    followed = hpc_train("logs", "4242", "--follow", cwd=tmp_path, fake=fake)
    assert followed.returncode == 2 and followed.stderr.count("\n") == 1
    assert "--follow takes one element of sweep 4242: hpc-train logs 4242_I --follow (I from 0 to 3)" in followed.stderr
    assert hpc_train("cancel", "4242_2", cwd=tmp_path, fake=fake).returncode == 0
    assert [call.args for call in fake.calls("scancel")] == [["4242_2"]]


def test_report_ranks_the_elements_by_the_objective_and_writes_a_csv_and_a_plot(tmp_path: Path) -> None:
    fake = mock_array_slurm(tmp_path / "fake")
    submitted = hpc_train("submit", "--nodes", "1", "--name", "sw", "--sweep", "learning_rate=0.1,0.01,0.001",
                          cwd=tmp_path, fake=fake)
    assert submitted.returncode == 0, submitted.stderr
    for index, accuracies in enumerate(([0.80, 0.85], [0.90, 0.97], [0.88, 0.93])):
        element = tmp_path / "runs" / f"sw-4242_{index}"
        (element / "metrics.json").write_text(json.dumps({"epochs": [
            {"epoch": epoch + 1, "val_accuracy": value, "val_loss": 1 - value} for epoch, value in enumerate(accuracies)]}))
        (element / "config.yaml").write_text(  # (as the array's script writes it, the element's values in)
            f"learning_rate: {[0.1, 0.01, 0.001][index]}\nepochs: 2\noutput_dir: {element}\n")
    report = hpc_train("report", "4242", cwd=tmp_path, fake=fake)
    assert report.returncode == 0, report.stderr
    lines = report.stdout.splitlines()
    assert [line.split()[:3] for line in lines[1:4]] == [["1", "1", "0.01"], ["2", "2", "0.001"], ["3", "0", "0.1"]]
    assert "best (highest val_accuracy): element 1: learning_rate=0.01: val_accuracy 0.9700" in report.stdout
    by_loss = hpc_train("report", "4242", "--objective", "val_loss", cwd=tmp_path, fake=fake).stdout
    assert "best (lowest val_loss): element 1" in by_loss
    csv_rows = (tmp_path / "runs" / "sw-4242" / "sweep.csv").read_text().splitlines()
    assert csv_rows[0] == "index,learning_rate,state,epochs,val_accuracy,val_loss" and csv_rows[1].startswith("1,0.01,")
    assert (tmp_path / "runs" / "sw-4242" / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    missing = hpc_train("report", "4242", "--objective", "val_auc", cwd=tmp_path, fake=fake)
    assert missing.returncode == 2 and "no run has val_auc yet" in missing.stderr
    # (issue 46, 5) --export on a grid: the best element's settings, from its folder (no study needed)
    exported = hpc_train("report", "4242", "--export", "best.yaml", cwd=tmp_path, fake=fake)
    assert exported.returncode == 0, exported.stderr
    assert "wrote best.yaml: the best element's settings" in exported.stdout
    best = yaml.safe_load((tmp_path / "best.yaml").read_text())
    assert best["learning_rate"] == 0.01 and "output_dir" not in best
    assert (tmp_path / "best.yaml").read_text().startswith("# the best element (sw-4242_1) of sweep 4242 by "
                                                           "val_accuracy: 0.9700\n")
    one = hpc_train("report", "4242_1", "--export", "one.yaml", cwd=tmp_path, fake=fake)
    assert one.returncode == 2 and "--export applies to a sweep (its best element)" in one.stderr


def test_without_slurm_a_sweep_is_one_line_saying_how_to_get_one(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    result = subprocess.run([sys.executable, "-m", "hpc_train", "submit", "--nodes", "1", "--sweep", "seed=1,2"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            env={**without_slurm(), "PATH": str(empty)})
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "a sweep runs as a job array; start a local cluster with hpc-train cluster up" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_a_sweep_submitted_held_stays_held_for_its_own_release(tmp_path: Path) -> None:
    fake = mock_array_slurm(tmp_path / "fake")
    submitted = hpc_train("submit", "--nodes", "1", "--name", "sw", "--sweep", "seed=1,2", "--hold", cwd=tmp_path,
                          fake=fake)
    assert submitted.returncode == 0, submitted.stderr
    assert not [line for line in fake.lines("scontrol") if " release " in line] and (tmp_path / "runs" / "sw-4242_1").is_dir()


def test_a_release_slurm_refuses_is_one_line_naming_the_command(tmp_path: Path) -> None:
    fake = mock_array_slurm(tmp_path / "fake").on("scontrol release", Reply(stderr="Access denied\n", code=1))
    submitted = hpc_train("submit", "--nodes", "1", "--name", "sw", "--sweep", "seed=1,2", cwd=tmp_path, fake=fake)
    assert submitted.returncode == 2 and submitted.stderr.count("\n") == 1, submitted.stderr
    assert "release it with: scontrol release 4242" in submitted.stderr
