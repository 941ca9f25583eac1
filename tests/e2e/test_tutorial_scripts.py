"""Other people's scripts, unmodified, on a real Slurm: scripts in the shape of TensorFlow's multi-worker tutorials
(tf.keras under Keras 3's TensorFlow), TensorFlow's PreemptionCheckpointHandler, and Keras' BackupAndRestore.

The four jobs are submitted at once (two run side by side on the four nodes); each test then follows its own.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpc_train.localslurm.spec import LocalCluster
from tests.e2e.jobs import FINAL_STATES
from tests.e2e.test_task_modules import SubmittedJob, submit

pytestmark = [pytest.mark.slurm_cluster, pytest.mark.tensorflow]
SHARED_JOBS = True  # its jobs run side by side, for several tests: conftest cancels leftovers after the module
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# The two that are interrupted come first; the second waits, held, until its test releases it: its test must see
# it from its start to requeue it early.
# The preemption job has 6,000 short steps, more than any wait for the warning can outlast (its log's lines came
# seconds late on a loaded machine, 270 and then 600 steps were over first); its test ends it once it has resumed.
SCRIPTS = {"preemption": (("preemption.py", "--epochs", "200"), "--command-signal", "TERM"),
           "backup": (("backup_restore.py", "--epochs", "10"), "--hold"), "keras": (("keras_multiworker.py",),),
           "loop": (("custom_loop.py",),)}


@pytest.fixture(scope="module")
def jobs(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, SubmittedJob]:
    workdir = tmp_path_factory.mktemp("tutorials")
    return {name: submit(cluster, workdir, name, *options, "--", sys.executable, str(EXAMPLES / script), *arguments)
            for name, ((script, *arguments), *options) in SCRIPTS.items()}


def wait_for_log(job: SubmittedJob, text: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while text not in job.log(0):
        if time.monotonic() > deadline or job.state()[0] in FINAL_STATES:
            subprocess.run(["scancel", job.id], env=job.env)
            pytest.fail(f"job {job.id} never logged {text!r}:\n{job.log(0, 'err')[-3000:]}")
        time.sleep(0.3)


def test_preemption_checkpoint_handler_is_warned_saves_exits_42_is_requeued_and_resumes(
        jobs: dict[str, SubmittedJob]) -> None:
    job = jobs["preemption"]
    wait_for_log(job, "starting at step 0")  # TensorFlow's handler made: it watches SIGTERM from then on
    subprocess.run(["scancel", "--signal=USR2", job.id], env=job.env, check=True)  # submitit's time-limit warning
    # Saved, exited 42, requeued: the rerun starts at the step it saved, and trains on from there.
    resumed = re.compile(r"^starting at step [1-9]\d*\n(?:.*\n)*?epoch \d+/200: loss", re.M)
    deadline = time.monotonic() + 240
    while not resumed.search(job.log(0)):
        assert time.monotonic() < deadline and job.state()[0] not in FINAL_STATES, job.log(0, "err")[-3000:]
        time.sleep(0.3)
    subprocess.run(["scancel", job.id], env=job.env, check=True)  # (the rest of its steps would prove nothing more)
    starts = [int(step) for step in re.findall(r"^starting at step (\d+)$", job.log(0), re.M)]
    assert starts[0] == 0 and len(starts) == 2 and 0 < starts[1] < 6000, job.log(0)  # resumed where it saved
    assert re.search(r"the command stopped to go on later \(exit 42\); requeueing job \d+", job.log(0, "err"))


def test_backup_and_restore_goes_on_after_scontrol_requeue(jobs: dict[str, SubmittedJob]) -> None:
    job = jobs["backup"]
    subprocess.run(["scontrol", "release", job.id], env=job.env, check=True)
    wait_for_log(job, "epoch 2/10 begins (restart 0)")
    # Slurm's SIGTERM, then SIGKILL after KillWait: TensorFlow's coordination service swallows the SIGTERM, so the
    # first run trains on until killed, mid-epoch, its last whole epoch backed up.
    subprocess.run(["scontrol", "requeue", job.id], env=job.env, check=True)
    assert job.wait() == ("COMPLETED", "0:0"), job.log(0, "err")[-3000:]
    log = job.log(0)
    last_before = max(int(epoch) for epoch in re.findall(r"^epoch (\d+)/10 begins \(restart 0\)$", log, re.M))
    first_again = int(re.findall(r"^epoch (\d+)/10 begins \(restart 1\)$", log, re.M)[0])
    # No whole epoch trained twice, none skipped: the restart begins with the epoch the kill cut short, or with the
    # next one when the kill came after an epoch's end was backed up but before the next one began.
    assert 2 <= last_before <= first_again <= last_before + 1 < 11 and "done: accuracy" in log, log


def test_the_keras_tutorials_shape_runs_as_it_is_with_tf_keras(jobs: dict[str, SubmittedJob]) -> None:
    job = jobs["keras"]
    assert job.wait() == ("COMPLETED", "0:0"), job.log(0, "err")[-3000:]
    assert "done: worker 0" in job.log(0) and "done: worker 1" in job.log(1)
    assert re.search(r"rank 1 is worker 1 at node\d+:\d+, GPUs: .*, Keras: tf-keras 2\.\d+", job.log(1, "err"))
    assert "cudart_stub" not in job.log(0, "err")  # the start-up noise is filtered from a command's log too


def test_the_custom_loop_tutorials_shape_runs_as_it_is(jobs: dict[str, SubmittedJob]) -> None:
    job = jobs["loop"]
    assert job.wait() == ("COMPLETED", "0:0"), job.log(0, "err")[-3000:]
    assert "Epoch: 2, accuracy:" in job.log(0) and "done: worker 1" in job.log(1)  # reset_states() ran each epoch
    assert list((job.folder / "ckpt").glob("ckpt-3.index"))  # the chief's checkpoint in the job's folder
