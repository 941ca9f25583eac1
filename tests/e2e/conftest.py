"""One real local Slurm cluster for every end-to-end test file of the session (bringing one up takes seconds)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpc_train.localslurm import control
from hpc_train.localslurm.spec import LocalCluster
from tests.e2e.jobs import local_cluster_possible

TEST_CLUSTER = LocalCluster(Path("/tmp/hpc-train-slurm-tests"), nodes="node[1-2],node[9-10]", cpus=4,
                            controller_port=7017)


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    if not local_cluster_possible():
        pytest.skip("a local Slurm cluster needs root, and Slurm or apt-get to install it")
    was_running = all(control.status(TEST_CLUSTER).values())
    placed = control.placed(TEST_CLUSTER)  # 7017 or, when something else holds it, the next free ports
    control.up(placed)
    yield placed
    if not was_running:
        control.down(placed)


@pytest.fixture(autouse=True)
def no_job_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each end-to-end test, cancel what it left in the queue: a test that failed half-way must not leave
    jobs holding the nodes while the next tests wait for them. A module whose jobs run side by side, submitted
    once for several tests (`SHARED_JOBS = True`), is cleaned up after its last test instead."""
    yield
    if getattr(request.module, "SHARED_JOBS", False):
        return
    cancel_every_job(request)


@pytest.fixture(autouse=True, scope="module")
def no_shared_job_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if getattr(request.module, "SHARED_JOBS", False):
        cancel_every_job(request)


def cancel_every_job(request: pytest.FixtureRequest) -> None:
    if "cluster" in request.fixturenames and all(control.status(TEST_CLUSTER).values()):
        env = control.slurm_env(TEST_CLUSTER)
        queued = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True).stdout.split()
        if queued:
            subprocess.run(["scancel", *queued], env=env, capture_output=True)
