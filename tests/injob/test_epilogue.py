"""The one epilogue every batch script runs after a failed step: the job's exit code, decided once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hpc_train.injob import body
from hpc_train.injob.body import JobBody
from hpc_train.injob.epilogue import job_exit_code, main, read_state
from tests.fake_slurm import FakeSlurm

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


@pytest.mark.parametrize("finished, expected", [(True, 0), (False, 137)])
def test_the_job_body_runs_it_after_a_failure(finished: bool, expected: int, tmp_path: Path) -> None:
    run_dir = tmp_path / "run dir; touch PWNED"
    run_dir.mkdir()
    if finished:
        (run_dir / "state.json").write_text('{"state": "finished"}')
    assert body.epilogue(JobBody(run_dir, "parameter_server"), 137, {}) == expected
    assert not list(tmp_path.rglob("PWNED"))


def test_an_epilogue_that_fails_by_itself_leaves_the_steps_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    def broken(*args: object) -> int:
        raise OSError("disk gone")

    (tmp_path / "state.json").write_text('{"state": "finished"}')
    monkeypatch.setattr("hpc_train.injob.epilogue.after_the_step", broken)
    assert body.epilogue(JobBody(tmp_path, "parameter_server"), 137, {}) == 137
    assert "warning: the epilogue failed (OSError: disk gone)" in capsys.readouterr().err


def test_the_batch_scripts_run_it_as_a_hidden_hpc_train_verb(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hpc_train.cli import main as cli

    (tmp_path / "state.json").write_text('{"state": "finished"}')
    assert cli(["epilogue", "137", str(tmp_path), "parameter_server"]) == 0
    assert cli(["epilogue", "137", str(tmp_path), "multiworker"]) == 137
    assert "but the chief finished training" in capsys.readouterr().err
    cli_help = subprocess.run([sys.executable, "-m", "hpc_train", "--help"], capture_output=True, text=True)
    assert "epilogue" not in cli_help.stdout  # not for people


def fake_slurm(folder: Path, log: Path, node_states: str = "node1 idle\nnode2 idle\nnode3 idle\nnode4 idle",
               job_state: str = "RUNNING") -> FakeSlurm:
    """scontrol and sinfo as a 4-node cluster shows them for job 42 on node[1-2]; every call recorded."""
    return FakeSlurm(folder, {
        "scontrol": "",  # requeue, update: taken
        "scontrol show": f"JobId=42 JobState={job_state} NodeList=node[1-2] NumNodes=2 ExcNodeList=(null) "
                         f"Partition=debug StdErr={log} StdOut={log}\n",
        "sinfo": node_states + "\n"})


def run_epilogue(tmp_path: Path, log_text: str, notes: list[dict], *options: str,
                 job_state: str = "RUNNING") -> tuple[int, str, str, dict]:
    import json
    import os

    from hpc_train.runs import attempts
    from tests.fake_slurm import without_slurm

    run_dir = tmp_path / "run dir; touch PWNED"
    run_dir.mkdir()
    log = tmp_path / "slurm-x-42.out"
    log.write_text("hpc-train: job 42 on node[1-0]\nsrun: error: node1: task 0: Exited with exit code 1\n"  # earlier
                   "hpc-train: job 42 (restart 1) on node[1-2]\n" + log_text)
    for note in notes:
        attempts.note_failure(run_dir, note.pop("kind"), "", environ={"SLURM_PROCID": str(note.pop("rank")),
                                                                      "SLURMD_NODENAME": "node1"}, **note)
    fake = fake_slurm(tmp_path / "fake", log, job_state=job_state)
    fake.install(tmp_path / "bin")
    script = [sys.executable, "-m", "hpc_train", "epilogue", "137", str(run_dir), "multiworker", *options]
    env = {**without_slurm(), "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "SLURM_JOB_ID": "42",
           "SLURM_RESTART_COUNT": "1"}
    result = subprocess.run(script, cwd=tmp_path, capture_output=True, text=True, env=env)
    assert not list(tmp_path.rglob("PWNED")) and not list((run_dir / ".failures").glob("*.json"))
    state = json.loads((run_dir / "state.json").read_text()) if (run_dir / "state.json").exists() else {}
    calls = "".join(f"{line}\n" for line in fake.lines("scontrol"))
    return result.returncode, result.stderr, calls, state


def test_a_task_killed_requeues_the_job_without_its_node(tmp_path: Path) -> None:
    code, said, calls, state = run_epilogue(tmp_path, "srun: error: node2: task 1: Killed\n"
                                            "srun: error: node1: task 0: Terminated\n", [])
    assert code == 0, said
    assert "scontrol requeue 42\nscontrol update JobId=42 ExcNodeList=node2\n" in calls
    assert "hpc-train: attempt 3 of 4: retried after node2 task 1 was killed; node2 excluded; job 42 requeued" in said
    [entry] = state["attempts"]
    assert (entry["attempt"], entry["cause"], entry["action"], entry["excluded"]) == (
        2, "node2 task 1: Killed", "retried", ["node2"])


def test_a_failure_that_would_repeat_is_not_retried_and_its_code_stands(tmp_path: Path) -> None:
    code, said, calls, state = run_epilogue(tmp_path, "srun: error: node1: task 0: Exited with exit code 1\n",
                                            [{"kind": "task_error", "rank": 0}], "--max-retries", "5")
    assert code == 137 and "requeue" not in calls
    assert "attempt 2 of 6 failed: node1 task 0: the task module failed; not retried: the task module failed" in said
    assert state["attempts"][0]["action"] == "failed"


def test_a_job_slurm_is_already_requeuing_or_ending_is_left_to_slurm(tmp_path: Path) -> None:
    code, said, calls, state = run_epilogue(tmp_path, "srun: error: node2: task 1: Killed\n", [],
                                            job_state="COMPLETING")
    assert code == 137 and "requeue" not in calls and "attempts" not in state
    assert "the job is already COMPLETING (Slurm's doing): not retried here" in said


def test_the_ranks_components_leave_out_a_data_services_own(tmp_path: Path) -> None:
    # (issue 47) A multiworker job with --data-partition: two components, the ranks' then the service's; the body's
    # view has no SLURM_HET_SIZE (one component of ranks). show_job keeps the last line, the service's: a retry must
    # read the ranks' nodes, not the service's cpu node.
    from hpc_train.injob.epilogue import ranks_components

    shown = ("JobId=7 HetJobId=7 HetJobOffset=0 JobState=RUNNING NodeList=hgpu[1-2] Partition=gpu ExcNodeList=(null)\n"
             "JobId=8 HetJobId=7 HetJobOffset=1 JobState=RUNNING NodeList=hcpu1 Partition=cpu ExcNodeList=(null)\n")
    fake = FakeSlurm(tmp_path, {"scontrol show": shown})
    served = {"SLURM_JOB_ID": "7", "HPC_TRAIN_DATA_COMPONENT": "1", "HPC_TRAIN_DATA_NODES": "hcpu1"}
    parts = ranks_components(fake.client(), "7", served)
    assert [part["NodeList"] for part in parts] == ["hgpu[1-2]"]
    assert ranks_components(fake.client(), "7", {"SLURM_JOB_ID": "7", "SLURM_HET_SIZE": "2"}) == [
        {**parts[0]}, {**fake.client().show_job_components("7")[1]}]  # a heterogeneous job of ranks: every part
    assert ranks_components(FakeSlurm(tmp_path / "plain", {}).client(), "7", {"SLURM_JOB_ID": "7"}) == []
