"""How a run ends (training/outcome.py), without TensorFlow: the notes failures leave, a lost peer named, a stop
recorded and requeued or not, a prune recorded, the final figures of a task without its own."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from hpc_train.config import TrainConfig
from hpc_train.errors import HpcTrainError
from hpc_train.exitcodes import EXIT_STOPPED
from hpc_train.runs import attempts
from hpc_train.runs.state import read_state, write_state
from hpc_train.training import outcome
from hpc_train.training.paths import RunPaths
from hpc_train.training.progress import Progress
from hpc_train.training.rank import SINGLE, RankInfo
from hpc_train.training.rendezvous import PeersMissing
from hpc_train.training.stopping import StopKind, StopSignals
from hpc_train.training.usertask import TaskError
from tests.runs.test_requeue import fake_scontrol
from tests.fake_slurm import Reply

TWO_WORKERS = {"worker": ["node1:20001", "node2:20001"]}


@dataclass(frozen=True)
class Stop:  # what callbacks.StoppedEarly carries
    kind: StopKind
    checkpoint: str


@dataclass(frozen=True)
class Verdict:  # what callbacks.Pruned carries
    epoch: int
    checkpoint: str
    reason: str


def signals(name: str | None) -> StopSignals:
    noted = StopSignals()
    noted.signal_name = name
    return noted


@pytest.fixture
def said() -> list[str]:
    return []


@pytest.mark.parametrize("error, kind", [(TaskError("task t: no build_model()"), "task_error"),
                                         (PeersMissing("worker 1 never came"), "lost_peer"),
                                         (outcome.LostContact("lost worker 1", "worker 1", ("node2",)), "lost_peer"),
                                         (HpcTrainError("bad config"), "refused")])
def test_each_failure_leaves_its_note_and_goes_on(error: Exception, kind: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_PROCID", raising=False)
    with pytest.raises(type(error)), outcome.noting_failures(tmp_path, SINGLE):
        raise error
    [note] = attempts.read_notes(tmp_path)
    assert (note["kind"], note["message"]) == (kind, str(error))
    if isinstance(error, outcome.LostContact):
        assert (note["peers"], note["lost"]) == (["node2"], "worker 1")


def test_a_lost_peer_is_named_with_its_node_and_how_to_go_on(tmp_path: Path) -> None:
    rank = RankInfo("worker", 0, TWO_WORKERS)
    error = RuntimeError("UNAVAILABLE: failed to connect to all addresses; node2:20001\nmore detail")
    lost = outcome.lost_contact(error, rank, RunPaths(tmp_path, rank), probe=lambda rank: [])
    assert str(lost).startswith("lost contact with worker 1 at node2:20001 (UNAVAILABLE: failed to connect")
    assert f"resume from the last checkpoint in {tmp_path / 'checkpoints'}" in str(lost)
    assert (lost.lost, lost.hosts, lost.exit_code) == ("worker 1", ("node2",), outcome.LostContact.exit_code)


def test_the_peer_whose_port_is_closed_is_named_over_the_one_tensorflows_message_names(tmp_path: Path) -> None:
    # A parameter server's death may reach the chief as worker 1's failed step: the closed port says who it was.
    rank = RankInfo("chief", 0, {"chief": ["node1:20000"], "ps": ["node1:20001"], "worker": ["node2:20002"]})
    error = RuntimeError("UNAVAILABLE: Graph execution error: [/job:worker/replica:0/task:0]")
    lost = outcome.lost_contact(error, rank, RunPaths(tmp_path, rank), probe=lambda rank: ["ps 0 at node1:20001"])
    assert str(lost).startswith("lost contact with ps 0 at node1:20001 (UNAVAILABLE: Graph execution error")
    assert (lost.lost, lost.hosts) == ("ps 0", ("node1",))


def test_a_stop_is_recorded_and_the_job_not_requeued(tmp_path: Path, said: list[str]) -> None:
    code = outcome.stopped(Stop(StopKind.STOP, "ckpt-40"), _config(), Progress(40, 30), RunPaths(tmp_path, SINGLE),
                           signals("SIGTERM"), said.append)
    state = read_state(tmp_path)
    assert code == EXIT_STOPPED and (state["state"], state["global_step"], state["signal"]) == ("stopped", 40,
                                                                                                 "SIGTERM")
    assert said == ["stopped in epoch 2 after step 10 of 30 (step 40) by SIGTERM and saved ckpt-40; running the job "
                    "again resumes there"]


def test_a_warned_chief_requeues_its_job_and_records_it(tmp_path: Path, said: list[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_scontrol(tmp_path, Reply(), monkeypatch)
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    code = outcome.stopped(Stop(StopKind.WARNING, "ckpt-30"), _config(), Progress(30, 30), RunPaths(run_dir, SINGLE),
                           signals("SIGUSR1"), said.append)
    assert code == 0 and read_state(run_dir)["state"] == "requeued"
    assert fake.lines() == ["scontrol requeue 42"]
    assert [entry["action"] for entry in attempts.history(run_dir)] == ["requeued"]
    assert said == ["stopped after epoch 1 (step 30) and saved ckpt-30; requeueing job 42 (requeue 1 of at most 5): "
                    "it resumes from there"]


def test_a_warned_run_outside_slurm_says_why_it_is_not_requeued(tmp_path: Path, said: list[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    code = outcome.stopped(Stop(StopKind.WARNING, "ckpt-30"), _config(), Progress(30, 30),
                           RunPaths(tmp_path, SINGLE), signals("SIGUSR1"), said.append)
    state = read_state(tmp_path)
    assert code == EXIT_STOPPED and state["not_requeued"] == "not a Slurm job: run the same command again to resume"
    assert said == ["stopped after epoch 1 (step 30) and saved ckpt-30; not requeued: not a Slurm job: run the same "
                    "command again to resume"]


def test_other_ranks_record_nothing_and_exit_0_once_the_chief_has_recorded_the_stop(tmp_path: Path,
                                                                                    said: list[str]) -> None:
    import threading

    worker = RankInfo("worker", 1, TWO_WORKERS)
    # The chief records the stop once its side of the barrier's all-reduce is done: a worker gone before that
    # fails it (the chief read "Socket closed" and took the stop for a lost peer). The worker waits for the record.
    for kind, call in (("requeued", lambda: outcome.stopped(Stop(StopKind.WARNING, "ckpt-30"), _config(),
                                                              Progress(30, 30), RunPaths(tmp_path, worker),
                                                              signals(None), said.append)),
                       ("pruned", lambda: outcome.pruned(Verdict(1, "ckpt-30", "worse"), _config(), Progress(30, 30),
                                                         RunPaths(tmp_path, worker), said.append))):
        write_state(tmp_path, "running", **Progress(20, 30).position())
        codes: list[int] = []
        leaving = threading.Thread(target=lambda: codes.append(call()))
        leaving.start()
        leaving.join(0.5)
        assert leaving.is_alive() and codes == []  # still there: no record of the chief's yet
        write_state(tmp_path, kind, **Progress(30, 30).position())
        leaving.join(10)
        assert codes == [0], kind
    assert said == []
    # A chief that never records it (its node lost): the worker leaves after the bound, never waits for ever.
    outcome.wait_for_the_chiefs_record(worker, RunPaths(tmp_path / "elsewhere", worker), 30, timeout=0.2)


def test_a_pruned_element_records_why_and_keeps_its_checkpoint(tmp_path: Path, said: list[str]) -> None:
    verdict = Verdict(2, "ckpt-60", "val_accuracy 0.5000 ranks in the worse half of the 3 elements at epoch 2")
    assert outcome.pruned(verdict, _config(), Progress(60, 30), RunPaths(tmp_path, SINGLE), said.append) == 0
    state = read_state(tmp_path)
    assert (state["state"], state["epoch"], state["checkpoint"], state["epochs_done"]) == ("pruned", 2, "ckpt-60", 2)
    assert said == [f"pruned after epoch 2/5: {verdict.reason}; checkpoint ckpt-60 kept; its nodes go to the "
                    "elements still waiting"]


def test_without_final_metrics_the_last_epochs_validation_figures_are_final() -> None:
    epochs = [{"epoch": 1, "loss": 0.5, "val_accuracy": 0.9}, {"epoch": 2, "loss": 0.4, "val_accuracy": 0.95,
                                                                 "val_loss": 0.2}]
    assert outcome.last_validation(epochs) == {"final_val_accuracy": 0.95, "final_val_loss": 0.2}
    assert outcome.last_validation([]) == {}


def _config() -> TrainConfig:
    return TrainConfig(epochs=5, max_requeues=5)



def test_a_process_ended_at_once_leaves_its_run_stopped_not_running(tmp_path: Path) -> None:
    (tmp_path / "worker").mkdir()
    line = "hpc-train: stopping at once (SIGTERM again): the training step never returned (...)"
    outcome.ended_at_once(RunPaths(tmp_path / "worker", RankInfo("worker", 1, TWO_WORKERS)))("SIGTERM", line)
    assert read_state(tmp_path / "worker") == {}  # only the chief writes the run's state
    outcome.ended_at_once(RunPaths(tmp_path, SINGLE))("SIGTERM", line)
    state = read_state(tmp_path)
    assert state["state"] == "stopped" and state["signal"] == "SIGTERM" and state["checkpoint"] is None
    assert state["reason"].startswith("stopping at once (SIGTERM again)")


@pytest.mark.parametrize("environ, code, out", [
    ({"HPC_TRAIN_RUN_DIR": "/runs/job-1"}, 7, "trained"),  # a job's rank: gone at once, its words written first
    ({}, 0, "trained; the end as usual"),  # by hand: Python's own end (atexit runs)
])
def test_a_jobs_rank_leaves_at_once_when_done_and_a_run_by_hand_ends_as_usual(environ: dict, code: int,
                                                                                out: str) -> None:
    import subprocess
    import sys

    program = ("import atexit, sys; from hpc_train.training.outcome import leave_when_done; "
               "atexit.register(lambda: print('; the end as usual', end='')); print('trained', end=''); "
               f"sys.exit(leave_when_done(7 if {environ!r} else 0, {environ!r}))")
    ended = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert (ended.returncode, ended.stdout) == (code, out), ended.stderr


def test_a_datasets_asserted_length_through_a_served_share_is_one_line_with_the_fix() -> None:
    # (issue 47) Each of 2 or more data workers makes a share of the dataset (distributed_epoch): a length asserted
    # inside it fails; said as the task's mistake, with what to do, not as TensorFlow's traceback.
    message = ("Input dataset was expected to contain 124 elements but contained only 60.\n"
               "\t [[{{node IteratorGetNext}}]] [Op:__inference_train_function_1234]")
    served = {"HPC_TRAIN_DATA_SERVICE": "grpc://node1:7000", "HPC_TRAIN_DATA_SERVICE_WORKERS": "2"}
    error = outcome.served_share(message, served)
    assert error is not None and "\n" not in str(error)
    assert str(error) == (
        "the task's dataset asserts its length (Input dataset was expected to contain 124 elements but contained only "
        "60.), and through the data service each data worker makes only its share of it: take assert_cardinality "
        "out of the dataset (steps_per_epoch sets an epoch's length), or run with --data-workers 1")
    assert outcome.served_share(message, {}) is None  # without the service: TensorFlow's own error stands
    assert outcome.served_share("Input to reshape is a tensor with 3 values", served) is None
