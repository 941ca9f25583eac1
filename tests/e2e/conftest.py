"""Three real local Slurm clusters, alike, for the end-to-end test files of the session (bringing one up takes
seconds): the session's, and a second and a third one for the files that run beside it (tests/clustergroups.py)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpc_train.localslurm import control
from hpc_train.localslurm.spec import LocalCluster
from tests.clustergroups import SECOND, SESSION, THIRD, cluster_group
from tests.e2e.jobs import local_cluster_possible

# The session's cluster runs a site's policy (a running job named fixed-size* cannot change its nodes): the
# packing tests see a release Slurm refuses.
TEST_CLUSTER = LocalCluster(Path("/tmp/hpc-train-slurm-tests"), nodes="node[1-2],node[9-10]", cpus=4,
                            controller_port=7017, job_submit_lua=Path(__file__).with_name("fixed_size.lua"))
# The same cluster again, twice (node names and all: a test may name them), each in its own folder and at its own
# ports.
SECOND_CLUSTER = LocalCluster(Path("/tmp/hpc-train-slurm-tests-2"), nodes="node[1-2],node[9-10]", cpus=4,
                              controller_port=7047)
THIRD_CLUSTER = LocalCluster(Path("/tmp/hpc-train-slurm-tests-3"), nodes="node[1-2],node[9-10]", cpus=4,
                             controller_port=7077)
CLUSTERS = {SESSION: TEST_CLUSTER, SECOND: SECOND_CLUSTER, THIRD: THIRD_CLUSTER}


def session_group(nodeid: str) -> str:
    """Which session cluster a test or module runs on: its group's (tests/clustergroups.py), else the first."""
    group = cluster_group(nodeid)
    return group if group in CLUSTERS else SESSION


@pytest.fixture(scope="session")
def session_clusters() -> dict[str, LocalCluster]:
    """The clusters this process brought up (or found running), by name (a worker runs one group's files)."""
    if not local_cluster_possible():
        pytest.skip("a local Slurm cluster needs root, and Slurm or apt-get to install it")
    return {}


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, session_clusters: dict[str, LocalCluster]) -> LocalCluster:
    """The module's session cluster, up (once per process; one this process started is stopped at its end)."""
    group = session_group(request.node.nodeid)
    if group not in session_clusters:
        spec = CLUSTERS[group]
        was_running = all(control.status(spec).values())
        placed = control.placed(spec)  # its own ports or, when something else holds them, the next free ones
        control.up(placed)
        session_clusters[group] = placed
        if not was_running:
            request.session.config.add_cleanup(lambda: control.down(placed))
    return session_clusters[group]


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
    """Cancel every job queued on the test's (or module's) cluster, if it uses one: from the clusters this process
    brought up (session-wide, so still there when a module's fixtures are torn down)."""
    if "cluster" not in request.fixturenames:
        return
    placed = request.getfixturevalue("session_clusters").get(session_group(request.node.nodeid))
    if placed is not None and all(control.status(placed).values()):
        env = control.slurm_env(placed)
        queued = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True).stdout.split()
        if queued:
            subprocess.run(["scancel", *queued], env=env, capture_output=True)
