"""Every rank in a Charliecloud image on a real Slurm, the job body outside (docs/containers.md).

The image (tests/e2e/charliecloud_image.py: Debian's minimal system and its python3, built once with debootstrap,
in the background by env/test.sh) has no TensorFlow and no hpc-train: the job's own come from its environment,
mounted (the job's hpc_train package first on the image Python's path, the job's site-packages after the image's
own). env/test.sh installs debootstrap and charliecloud-runtime when root.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hpc_train.localslurm.spec import LocalCluster
from tests.e2e import charliecloud_image
from tests.e2e.jobs import FINAL_STATES, rank_pid
from tests.e2e.test_task_modules import SubmittedJob, submit
from tests.mnist_data import shared_mnist

pytestmark = [pytest.mark.slurm_cluster, pytest.mark.tensorflow]
IMAGE = charliecloud_image.IMAGE
# 8000 MNIST images an epoch, a few seconds each here: the warning comes while the job still trains.
EPOCHS = 6
TIMEOUT = 900  # two ranks importing TensorFlow through a mount on a loaded machine: minutes
INSIDE = ("--container", str(IMAGE), "--container-runtime", "charliecloud")
PRINT_WHERE = ("import os, sys; print('inside', os.environ.get('CH_RUNNING'), sys.version.split()[0], "
               "os.environ['TF_CONFIG'])")


@pytest.fixture(scope="module")
def image() -> Path:
    """The Charliecloud image (a folder): built when it is not there yet (or its build by env/test.sh waited for)."""
    if not charliecloud_image.can_build():
        pytest.skip("needs ch-run and debootstrap (apt-get install charliecloud-runtime debootstrap; env/test.sh does)")
    failed = charliecloud_image.build()
    if failed:
        pytest.skip(f"debootstrap could not build the image (no Debian mirror?): {failed}")
    python = sorted(path.name for path in (IMAGE / "usr" / "bin").glob("python3.*") if path.name[8:].isdigit())
    here = f"python{sys.version_info.major}.{sys.version_info.minor}"
    if here not in python:
        pytest.skip(f"the image's Python ({', '.join(python)}) is not this one's ({here}): the job's TensorFlow, "
                    "mounted in, would not load")
    return IMAGE


def in_the_image(job: SubmittedJob, rank: int) -> bool:
    image_python = sorted((IMAGE / "usr" / "bin").glob("python3.*"))[0].name  # (not this machine's 3.11.7)
    line = re.search(r"hpc-train: in the charliecloud image: Python (\S+), TensorFlow \S+", job.log(rank))
    return bool(line) and line.group(1).startswith(image_python.removeprefix("python"))


def settings() -> tuple[str, ...]:
    return (*INSIDE, "--set", f"epochs={EPOCHS}", "--set", f"data_dir={shared_mnist()}", "--set",
            "checkpoint_minutes=0.05")


def wait_until(job: SubmittedJob, done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not done():
        assert time.monotonic() < deadline and job.state()[0] not in FINAL_STATES, job.log(0, "err")[-3000:]
        time.sleep(0.3)


@pytest.fixture(scope="module")
def whole_and_warned(cluster: LocalCluster, image: Path, tmp_path_factory: pytest.TempPathFactory
                     ) -> tuple[SubmittedJob, SubmittedJob]:
    """Two 2-node MNIST jobs in the image at once: one left alone, one warned in its second epoch; both ended."""
    folder = tmp_path_factory.mktemp("mnist-in-image")
    whole = submit(cluster, folder, "whole", *settings())
    warned = submit(cluster, folder, "warned", *settings())
    wait_until(warned, lambda: f"epoch 1/{EPOCHS}" in warned.log(0))
    # submitit's time-limit warning, to the ranks themselves: through ch-run (which execs) to the trainer inside.
    subprocess.run(["scancel", "--signal=USR2", warned.id], env=warned.env, check=True)
    return whole, warned


def test_a_two_node_mnist_job_runs_in_the_image_and_a_warned_one_requeues_and_resumes_exactly(
        whole_and_warned: tuple[SubmittedJob, SubmittedJob]) -> None:
    whole, warned = whole_and_warned
    assert whole.wait(TIMEOUT) == ("COMPLETED", "0:0"), whole.log(0, "err")[-3000:]
    assert all(in_the_image(whole, rank) for rank in (0, 1)), whole.log(0)[-3000:]
    assert re.search(r"rank 1 is worker 1 at node\d+", whole.log(1)), whole.log(1)[-2000:]
    assert warned.wait(TIMEOUT) == ("COMPLETED", "0:0"), warned.log(0, "err")[-3000:]
    log = warned.log(0) + warned.log(0, "err")
    # (the chief in the image has no scontrol: the job body, outside, requeued the job for it)
    assert re.search(r"requeueing job \d+ \(requeue 1 of at most \d+\)", log), log[-3000:]
    assert re.search(r"hpc-train: resuming (in|after) epoch", log), log[-3000:]
    assert [epoch["epoch"] for epoch in warned.metrics()["epochs"]] == list(range(1, EPOCHS + 1))
    assert warned.digest() == whole.digest()  # resumed exactly: the weights of the run never stopped


def test_a_killed_rank_in_the_image_is_retried_on_another_node_and_resumes(
        cluster: LocalCluster, tmp_path: Path, whole_and_warned: tuple[SubmittedJob, SubmittedJob]) -> None:
    whole, _ = whole_and_warned
    assert whole.wait(TIMEOUT)[0] == "COMPLETED"
    job = submit(cluster, tmp_path, "killed", *settings())
    wait_until(job, lambda: any((job.folder / "checkpoints").glob("ckpt-*.index")))
    pid = rank_pid(job.id, 1, lambda comm, cmdline: comm.startswith("python"),  # the rank inside: ch-run exec'd it
                   job.env.get("SLURM_CONF"))
    assert pid is not None, job.log(1)[-2000:]
    os.kill(pid, signal.SIGKILL)
    assert job.wait(TIMEOUT) == ("COMPLETED", "0:0"), job.log(0, "err")[-3000:]
    log = job.log(0, "err")
    assert re.search(r"hpc-train: attempt 2 of \d+: retried after .*; node\d+ excluded; resumed at step \d+", log), \
        log[-3000:]
    assert job.log(1).count("hpc-train: in the charliecloud image") == 2  # both attempts' rank 1, inside
    assert job.digest() == whole.digest()


def test_a_users_command_runs_in_the_image_under_the_bootstrap(cluster: LocalCluster, image: Path,
                                                              tmp_path: Path) -> None:
    job = submit(cluster, tmp_path, "mine", *INSIDE, "--", "python3", "-c", PRINT_WHERE)
    assert job.wait(TIMEOUT) == ("COMPLETED", "0:0"), job.log(0, "err")[-3000:]
    for rank in (0, 1):
        said = re.search(r"^inside (.+) (\S+) (\{.*\})$", job.log(rank), re.M)
        assert said and said.group(1) == "Weird Al Yankovic", job.log(rank)[-2000:]  # Charliecloud's CH_RUNNING
        assert json.loads(said.group(3))["task"] == {"type": "worker", "index": rank} and in_the_image(job, rank)
