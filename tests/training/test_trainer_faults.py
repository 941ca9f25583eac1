"""The trainer under stop signals and failures, as real processes on localhost and real MNIST.

A stop request (USR1, USR2, TERM) makes every task save at the same step
boundary and exit; running again resumes at that step with the batch that was
next, so the result is bit for bit that of an uninterrupted run. A task that
dies, or never starts, ends the others with one line naming it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpc_train.exitcodes import EXIT_LOST_PEER
from hpc_train.runs.attempts import PROGRESS_FILE
from hpc_train.training.stopping import Grace
from tests.fake_slurm import without_slurm
from tests.training.reference import SMALL, FinishedRun, small_run  # noqa: F401 - the fixture
from tests.training.runs import (EPOCH_LINE, Watched, digest, finish, local_cluster, metrics, start, state,
                                 task_config)
from tests.training.tasks import HANGING_ONCE, REGRESSION

pytestmark = pytest.mark.tensorflow
EXIT_STOPPED = 75


def test_a_warned_run_stops_mid_epoch_and_resumes_bit_for_bit(tmp_path: Path, small_run: FinishedRun) -> None:
    uninterrupted = small_run.digest  # the same settings, never stopped (a run the session shares)

    run = Watched(start(tmp_path / "run", *SMALL))
    run.wait_for("hpc-train: MNIST from")  # handlers in place, training about to start
    run.process.send_signal(signal.SIGUSR1)
    code, out, err = run.finish()
    assert code == EXIT_STOPPED, err[-3000:]
    stopped = state(tmp_path / "run")
    assert (stopped["state"], stopped["signal"], stopped["epochs_done"]) == ("stopped", "SIGUSR1", 0)
    assert 0 < stopped["step_in_epoch"] < 31 and stopped["global_step"] % 4 == 0  # at a step boundary
    assert stopped["checkpoint"].endswith(f"ckpt-{stopped['global_step']}")
    assert "not requeued: not a Slurm job: run the same command again to resume" in out
    assert EPOCH_LINE.findall(out) == []  # the part-done epoch is not reported as done

    [(code, out, err)] = finish([start(tmp_path / "run", *SMALL)])
    assert code == 0, err[-3000:]
    assert f"resuming in epoch 1 after step {stopped['global_step']} of 31" in out
    assert [int(m.group(1)) for m in EPOCH_LINE.finditer(out)] == [1, 2]
    assert digest(err) == uninterrupted  # same data order, optimizer state and step: the same model
    assert [epoch["images"] for epoch in metrics(tmp_path / "run")["epochs"]] == [
        (31 - stopped["global_step"]) * 64, 31 * 64]
    assert state(tmp_path / "run")["state"] == "finished"


def test_a_term_to_one_worker_stops_both_at_the_same_step_and_they_resume_at_another_size(tmp_path: Path) -> None:
    """One job for both (two TensorFlow starts less): a stop request to one worker stops both at the same step;
    its checkpoint restores at another size with the same global batch (a node range's next attempt, docs/jobs.md
    "Node ranges"). A user's task module: the global batch of 16 is 8 per replica on 2 and 16 on 1; an epoch is
    128 steps at both sizes. (Resuming on the same 2 workers, their weights one model and the run's bit for bit:
    tests/e2e/test_trainer_jobs.py's warned and damaged-checkpoint jobs, on a real Slurm.)"""
    # SIGTERM also checks that TensorFlow's own SIGTERM handler (its coordination service) was replaced.
    settings = (f"task={REGRESSION}", "epochs=3", "steps_per_execution=4", "strategy=multiworker",
                "global_batch=16", "batch_size=16")
    cluster = local_cluster(worker=2)
    runs = [Watched(start(tmp_path, *settings, tf_config=task_config(cluster, "worker", index)))
            for index in range(2)]
    # The chief's first steps (its progress beat): a step is both workers', so worker 1 trains too, its handlers
    # taken back from TensorFlow's coordination service.
    runs[0].wait_for_file(tmp_path / PROGRESS_FILE)
    runs[1].process.send_signal(signal.SIGTERM)
    (chief_code, chief_out, chief_err), (other_code, _, other_err) = [run.finish() for run in runs]
    assert (chief_code, other_code) == (EXIT_STOPPED, 0), chief_err[-2000:] + other_err[-2000:]
    assert "batch 8 per replica, 16 global; 128 steps per epoch" in chief_out
    stopped = state(tmp_path)
    step = stopped["global_step"]
    assert stopped["state"] == "stopped" and 0 < step < 3 * 128
    # Mostly mid-epoch 1; its 128 small steps may be over before the stop request meets a step boundary.
    where = (f"in epoch {stopped['epochs_done'] + 1} after step {stopped['step_in_epoch']} of 128 (step {step})"
             if stopped["step_in_epoch"] else f"after epoch {stopped['epochs_done']} (step {step})")
    assert f"[worker 1]: stopped by SIGTERM {where}" in other_err, other_err[-2000:]
    assert f"[worker 0]: stopped by another task's stop request {where}" in chief_err
    assert "by SIGTERM and saved" not in chief_out and "running the job again resumes there" in chief_out

    [(code, out, err)] = finish([start(tmp_path, *settings, tf_config=task_config(local_cluster(worker=1), "worker",
                                                                                  0))])
    assert code == 0, err[-3000:]
    assert "batch 16 per replica, 16 global; 128 steps per epoch" in out
    assert f"resuming {where}" in out, out
    assert "another input layout" not in err  # a change of size alone is the same training
    done = metrics(tmp_path)
    assert [epoch["epoch"] for epoch in done["epochs"]] == [1, 2, 3] and done["workers"] == 1
    assert done["totals"]["final_val_loss"] < 0.5 * done["epochs"][0]["loss"]


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("hpc-train train: error: ")]


def ps_job(output: Path, *settings: str, workers: int = 2) -> tuple[dict, list[Watched]]:
    cluster = local_cluster(chief=1, ps=1, worker=workers)
    roles = [("chief", 0), ("ps", 0), *(("worker", index) for index in range(workers))]
    return cluster, [Watched(start(output, "strategy=parameter_server", *settings,
                                   tf_config=task_config(cluster, role, index))) for role, index in roles]


def test_a_warned_parameter_server_job_saves_on_the_chief_and_resumes_with_a_worker_fewer(tmp_path: Path) -> None:
    _, tasks = ps_job(tmp_path, *SMALL)
    tasks[0].wait_for("hpc-train: MNIST from")
    tasks[0].process.send_signal(signal.SIGUSR1)
    results = [task.finish() for task in tasks]
    assert [code for code, _, _ in results] == [EXIT_STOPPED, 0, 0, 0], results[0][2][-3000:]
    stopped = state(tmp_path)
    # An epoch is both workers' batches: 2 x 15 of their 1,000 images each. The chief sees every step.
    assert stopped["state"] == "stopped" and 0 < stopped["global_step"] < 2 * 30

    # The next attempt of a node range may have fewer workers (docs/jobs.md "Node ranges"): a step is still one
    # worker's batch, so the checkpoint restores and the epoch goes on where it stopped, as long as it was (one
    # worker's data alone would make epochs of 31 steps).
    _, tasks = ps_job(tmp_path, *SMALL, workers=1)
    results = [task.finish() for task in tasks]
    assert [code for code, _, _ in results] == [0, 0, 0], results[0][2][-3000:]
    assert f"resuming in epoch 1 after step {stopped['global_step']} of 30" in results[0][1]
    assert "another input layout" not in results[0][2]
    finished = metrics(tmp_path)
    assert state(tmp_path)["state"] == "finished" and finished["workers"] == 1
    assert [epoch["epoch"] for epoch in finished["epochs"]] == [1, 2] and finished["steps_per_epoch"] == 30


@pytest.mark.mock_twin("tests/e2e/test_trainer_jobs.py::"
                       "test_a_parameter_server_job_is_retried_without_its_lost_ps_then_outlives_a_lost_worker")
def test_a_parameter_server_job_finishes_without_a_lost_worker(tmp_path: Path) -> None:
    _, tasks = ps_job(tmp_path, "epochs=3", "train_images=4000")
    tasks[0].wait_for("epoch 1/3")
    tasks[3].process.kill()
    results = [task.finish() for task in tasks]
    assert [code for code, _, _ in results] == [0, 0, 0, -signal.SIGKILL], results[0][2][-3000:]
    assert "Worker /job:worker/replica:0/task:1 failed" in results[0][2]  # the chief's log names it
    assert [epoch["epoch"] for epoch in metrics(tmp_path)["epochs"]] == [1, 2, 3]
    assert metrics(tmp_path)["totals"]["final_val_accuracy"] >= 0.9


@pytest.mark.mock_twin("tests/e2e/test_trainer_jobs.py::"
                       "test_a_parameter_server_job_is_retried_without_its_lost_ps_then_outlives_a_lost_worker")
def test_a_lost_parameter_server_ends_the_job_at_once_naming_it(tmp_path: Path) -> None:
    cluster, tasks = ps_job(tmp_path, "epochs=20", "train_images=4000")
    tasks[0].wait_for("epoch 1/20")
    tasks[1].process.kill()
    results = [task.finish(timeout=60) for task in tasks]  # at once: long before its 20 epochs (a wait's limit)
    assert [code for code, _, _ in results] == [EXIT_LOST_PEER, -signal.SIGKILL, 0, 0]  # not a refusal: retried
    [error] = error_lines(results[0][2])  # TensorFlow's own gRPC complaints may come after it
    assert error.startswith(f"hpc-train train: error: lost contact with ps 0 at {cluster['ps'][0]} (")
    assert error.endswith(f"run it again to resume from the last checkpoint in {tmp_path / 'checkpoints'}")


@pytest.mark.mock_twin("tests/e2e/test_trainer_jobs.py::test_a_killed_then_a_frozen_worker_are_retried_on_other_nodes_and_the_job_ends_as_if_never_stopped")
def test_a_lost_multiworker_peer_ends_the_other_naming_it(tmp_path: Path) -> None:
    cluster = local_cluster(worker=2)
    runs = [Watched(start(tmp_path, "strategy=multiworker", "epochs=20", "train_images=4000",
                          tf_config=task_config(cluster, "worker", index))) for index in range(2)]
    runs[0].wait_for("epoch 1/20")
    runs[1].process.kill()
    code, _, err = runs[0].finish(timeout=120)
    runs[1].finish()
    assert code == EXIT_LOST_PEER  # 69, not 2 (a refusal): a job retries it on other nodes
    note = json.loads((tmp_path / ".failures" / "rank-0.json").read_text())
    assert (note["kind"], note["lost"], note["peers"]) == ("lost_peer", "worker 1", [cluster["worker"][1].split(":")[0]])
    [error] = error_lines(err)
    assert error.startswith(f"hpc-train train: error: lost contact with worker 1 at {cluster['worker'][1]} (")


def test_a_peer_that_never_starts_fails_the_task_quickly_and_is_named(tmp_path: Path) -> None:
    cluster = local_cluster(worker=2)
    alone = Watched(start(tmp_path, "strategy=multiworker", "startup_timeout=3",
                          tf_config=task_config(cluster, "worker", 0)))
    code, _, err = alone.finish(timeout=30)  # quickly: its 3 s, not TensorFlow's own wait (a wait's limit)
    assert code == 2
    assert err.strip().splitlines()[-1] == ("hpc-train train: error: worker 1 did not start within 3 s; see their "
                                            "logs (they may have failed, or their nodes be unreachable), or raise "
                                            "startup_timeout")
    assert "tensorflow" not in err.lower()  # it failed before TensorFlow was even loaded


def test_a_rank_stuck_in_a_step_ends_at_once_on_a_second_sigterm_saying_so(tmp_path: Path) -> None:
    # The data stops flowing mid-epoch: the first SIGTERM waits for a step boundary that never comes.
    from tests.training.tasks import hanging_once

    task = HANGING_ONCE
    # 3 steps per execution: the step of the last batch (40) is inside an execution that never ends.
    command = [str(Path(sys.executable).parent / "hpc-train"), "train", "--task", str(task), "--output-dir",
               str(tmp_path), "--set", "steps_per_epoch=64", "--set", "steps_per_execution=3", "--set", "epochs=2"]
    run = Watched(subprocess.Popen(command, env=without_slurm(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True))
    run.wait_for(hanging_once.LAST_BATCH_LINE)  # from inside the step, after the last step boundary there is
    run.process.send_signal(signal.SIGTERM)
    # The stopping rule is the clock's: a TERM sooner than Grace().same_request_seconds after the first is the same
    # one delivered twice. TERM again until the process ends: the first that counts ends it at once.
    deadline = time.monotonic() + Grace().same_request_seconds + 10.0  # long before the grace period (a minute)
    while run.process.poll() is None:
        assert time.monotonic() < deadline, "a second SIGTERM did not end it:\n" + "".join(run.err)[-2000:]
        run.process.send_signal(signal.SIGTERM)
        time.sleep(0.25)  # a poll's interval, not an order: every TERM counts once the first is 2 s old
    code, _, err = run.finish(timeout=10)
    # Not 75 (stopped at a boundary): no step boundary came; it ended on a TERM again, before the grace period.
    assert code == 128 + signal.SIGTERM, err[-2000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("hpc-train: stopping at once (SIGTERM again): the training step never returned"), last
    assert "Traceback" not in err
