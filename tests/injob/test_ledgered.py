"""The job body's part of the goodput ledger (injob/ledgered.py): a user's command's start-up until its first
beat, the rest compute, a failure's time lost, the GPUs held, and an attempt's end noted on Slurm's SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpc_train.injob.ledgered import command_measures, gpus_held
from hpc_train.runs import goodput
from hpc_train.runs.ledger import CATEGORIES
from hpc_train.runs.state import read_json_object
from tests.fake_slurm import waiting_srun, without_slurm

# Start-up (a second before the first beat), then work until a file says it is done: about two seconds.
COMMAND = ('sleep 1; touch "$HPC_TRAIN_RUN_DIR/.heartbeat"; i=0; while [ $i -lt 20 ]; do i=$((i+1)); '
           'touch "$HPC_TRAIN_RUN_DIR/.heartbeat"; sleep 0.1; done; exit "$1"')


def run_command(tmp_path: Path, name: str, code: int) -> dict:
    result = subprocess.run([sys.executable, "-m", "hpc_train", "job", "--run-dir", f"runs/{name}", "--command",
                             "--", "sh", "-c", COMMAND, "job", str(code)], cwd=tmp_path, capture_output=True,
                            text=True, env={**without_slurm(), "SLURM_GPUS_PER_NODE": "gpu:2"}, timeout=120)
    assert result.returncode == code, result.stderr
    return goodput.read_ledger(tmp_path / "runs" / name)


def test_a_commands_attempt_is_startup_until_its_first_beat_then_compute(tmp_path: Path) -> None:
    made = run_command(tmp_path, "ok", 0)
    [row] = made["attempts"]
    assert row["startup"] >= 1.0 and row["compute"] >= 1.5 and row["lost"] == 0
    assert sum(row[name] for name in CATEGORIES) == pytest.approx(row["wall"], rel=0.05)
    assert row["other"] <= 0.05 * row["wall"] + 0.5 and made["gpu_seconds"] == pytest.approx(2 * row["wall"])
    assert made["goodput"] == pytest.approx(row["compute"] / row["wall"], abs=1e-3)


def test_a_failed_commands_time_after_its_start_up_is_lost(tmp_path: Path) -> None:
    [row] = run_command(tmp_path, "failed", 3)["attempts"]
    assert row["lost"] >= 1.5 and row["compute"] == 0


def test_with_the_ledger_off_nothing_is_measured(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "hpc_train", "job", "--run-dir", "runs/off", "--command", "--",
                             "true"], cwd=tmp_path, env={**without_slurm(), goodput.SETTING: "0"}, timeout=60)
    assert result.returncode == 0
    assert not (tmp_path / "runs" / "off" / goodput.MEASURES).exists()
    assert not (tmp_path / "runs" / "off" / goodput.LEDGER_FILE).exists()


def test_slurms_sigterm_during_the_step_notes_the_attempts_end_and_still_ends_the_body(tmp_path: Path) -> None:
    record, ready = tmp_path / "signals", tmp_path / "ready"
    waiting_srun(tmp_path / "bin", record, ready)
    env = {**without_slurm(), "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "SLURM_JOB_ID": "7"}
    job = subprocess.Popen([sys.executable, "-m", "hpc_train", "job", "--run-dir", "run", "--", "train"],
                           cwd=tmp_path, env=env, stderr=subprocess.DEVNULL, start_new_session=True,
                           preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))  # a batch shell's
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists()  # the step runs (a TERM before, in the prologue, is ignored)
        job.send_signal(signal.SIGTERM)  # Slurm's, to the batch shell (and to the step, which the fake leaves)
        job.wait(timeout=60)
    finally:
        os.killpg(job.pid, signal.SIGKILL)  # the fake srun, which Slurm would have ended
    assert job.returncode == -signal.SIGTERM
    noted = read_json_object(goodput.body_path(tmp_path / "run", 1))
    assert noted["started"] <= noted["ranks_ended"] == noted["ended"]
    # The body's own handler, called after the ledger's, records the attempt's end (not a requeue: it does not go on).
    [end] = read_json_object(tmp_path / "run" / "state.json")["ended"]
    assert (end["attempt"], end["exit"], end["signal"], end["goes_on"]) == (1, 128 + signal.SIGTERM, signal.SIGTERM,
                                                                          False)


def test_a_requeued_attempts_end_reaches_state_json_though_slurms_sigterm_ends_the_body(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hpc_train.injob import onterm
    from hpc_train.runs.attempts import ended_attempts, record, requeue_entry
    from hpc_train.runs.state import read_state

    killed: list[int] = []
    monkeypatch.setattr(onterm.os, "kill", lambda pid, signum: killed.append(signum))  # (the body's own end)
    before = signal.getsignal(signal.SIGTERM)
    on_term = onterm.ending_on_term((tmp_path, 1, "n[1-2]", time.time() - 5), requeues=0, tasks="4")
    record(tmp_path, requeue_entry(1, 62))  # the chief requeued the job on the time-limit warning
    try:
        on_term(signal.SIGTERM, None)  # then Slurm's SIGTERM
    finally:
        signal.signal(signal.SIGTERM, before)
    assert killed == [signal.SIGTERM]  # passed on, to end the body as the default would
    [end] = ended_attempts(read_state(tmp_path))
    assert (end["attempt"], end["nodes"], end["tasks"], end["goes_on"]) == (1, "n[1-2]", "4", True)


def test_the_gpus_held_are_slurms_per_node_times_the_nodes() -> None:
    assert gpus_held({"SLURM_GPUS_PER_NODE": "a100:4"}, 2, 0) == 8
    assert gpus_held({"SLURM_GPUS_ON_NODE": "2"}, 3, 0) == 6
    assert gpus_held({}, 2, 1) == 2 and gpus_held({}, 2, 0) == 0


def test_a_command_that_never_beat_counts_from_its_start() -> None:
    assert command_measures(10.0, 20.0, None) == {"first_steps": 10.0, "totals": {"compute": 10.0}, "last": 20.0}
    assert command_measures(10.0, 20.0, 25.0)["first_steps"] == 20.0


def test_a_heterogeneous_job_holds_every_components_nodes_and_gpus(tmp_path: Path) -> None:
    from hpc_train.injob.body import JobBody, nodes_held

    env = {"SLURM_HET_SIZE": "2", "SLURM_JOB_NUM_NODES": "1", "SLURM_JOB_NUM_NODES_HET_GROUP_0": "1",
           "SLURM_JOB_NUM_NODES_HET_GROUP_1": "2", "SLURM_GPUS_PER_NODE_HET_GROUP_1": "gpu:2"}
    assert nodes_held(JobBody(tmp_path), env) == 3  # the parameter server's node and the workers' two
    assert gpus_held(env, 3, 0) == 4  # the workers' GPUs alone
    assert nodes_held(JobBody(tmp_path, nodes=2), {}) == 2 and nodes_held(JobBody(tmp_path),
                                                                          {"SLURM_JOB_NUM_NODES": "4"}) == 4


def test_a_packed_trials_attempt_is_its_own_in_its_folder(tmp_path: Path) -> None:
    from hpc_train.injob.ledgered import ledgered_trial, trial_ended
    from hpc_train.injob.pack.core import Slot, Start
    from hpc_train.runs.attempts import record_end

    trial = tmp_path / "sweep_3"
    env = ledgered_trial(trial, Start(3, Slot(1, ("n2",)), 2), {"gpus": 1}, {})
    assert env == {goodput.ATTEMPT_VARIABLE: "2"} and goodput.attempt_number({**env, "SLURM_RESTART_COUNT": "0"}) == 2
    goodput.note_ranks(trial, 2, {"first_steps": time.time(), "totals": {"compute": 0.0}})
    trial_ended(trial, 2, {})
    record_end(trial, 2, "n2", read_json_object(goodput.body_path(trial, 2))["started"], 0, False)
    [row] = goodput.write_ledger(trial)["attempts"]
    assert (row["attempt"], row["nodes"], row["gpus"]) == (2, 1, 1)
    assert ledgered_trial(trial, Start(3, Slot(1, ("n2",)), 3), {"gpus": 1}, {goodput.SETTING: "0"}) == {}
