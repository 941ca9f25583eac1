"""The tests that run on a local Slurm cluster (tests/e2e and the demo's), in groups that never share a cluster:
the session's cluster, a second and a third one like it (tests/e2e/conftest.py), and the files that bring up
clusters of their own. Under pytest-xdist each group runs in one worker, in order, as it would alone, the groups
side by side (tests/conftest.py); with fewer than five workers the third cluster's files run in the worker of the
files with clusters of their own (together about as long as each of the other two), so that a fourth worker runs no
cluster at all: it fills the time the cluster workers spend waiting on Slurm and their jobs with the other tests.
The rest share the workers."""

from __future__ import annotations

ON_A_LOCAL_CLUSTER = ("tests/e2e/", "tests/test_demo.py")
SESSION, SECOND, THIRD = "the session's cluster", "the second session cluster", "the third session cluster"
OWN = "clusters of their own"
# Each of these files brings up its own cluster(s) (their node names, ports and folders apart).
ON_CLUSTERS_OF_THEIR_OWN = ("tests/test_demo.py", "tests/e2e/test_accounting.py", "tests/e2e/test_heterogeneous.py",
                            "tests/e2e/test_local_cluster.py", "tests/e2e/test_separate_hosts.py",
                            "tests/e2e/test_site_firewall.py")
# These run on the second session cluster, beside the first's (a module is the unit: its cluster is the module's).
ON_THE_SECOND_CLUSTER = ("tests/e2e/test_trainer_jobs.py", "tests/e2e/test_hangs.py", "tests/e2e/test_data_service.py")
# These on a third one.
ON_THE_THIRD_CLUSTER = ("tests/e2e/test_task_modules.py", "tests/e2e/test_tutorial_scripts.py")


def on_a_local_cluster(nodeid: str) -> bool:
    return nodeid.startswith(ON_A_LOCAL_CLUSTER)


def cluster_group(nodeid: str) -> str | None:
    """Which group of cluster tests the test (or module) is in, or None for one on no cluster."""
    if nodeid.startswith(ON_CLUSTERS_OF_THEIR_OWN):
        return OWN
    if nodeid.startswith(ON_THE_SECOND_CLUSTER):
        return SECOND
    if nodeid.startswith(ON_THE_THIRD_CLUSTER):
        return THIRD
    return SESSION if on_a_local_cluster(nodeid) else None


def worker_group(nodeid: str, workers: int) -> str | None:
    """The group whose worker runs the test: its own, but with fewer than 5 workers the third cluster's files join
    the files with clusters of their own (each group must have a worker to itself, and one worker is left for the
    tests on no cluster)."""
    group = cluster_group(nodeid)
    return OWN if group == THIRD and workers < 5 else group
