"""The tests that run on a local Slurm cluster (tests/e2e and the demo's), in groups that never share a cluster:
the session's cluster, a second one like it (tests/e2e/conftest.py), and the files that bring up clusters of their
own. Under pytest-xdist each group runs in one worker, in order, as it would alone, the groups side by side
(tests/conftest.py); the rest share the workers."""

from __future__ import annotations

ON_A_LOCAL_CLUSTER = ("tests/e2e/", "tests/test_demo.py")
SESSION, SECOND, OWN = "the session's cluster", "the second session cluster", "clusters of their own"
# Each of these files brings up its own cluster(s) (their node names, ports and folders apart).
ON_CLUSTERS_OF_THEIR_OWN = ("tests/test_demo.py", "tests/e2e/test_accounting.py", "tests/e2e/test_heterogeneous.py",
                            "tests/e2e/test_local_cluster.py", "tests/e2e/test_separate_hosts.py",
                            "tests/e2e/test_site_firewall.py")
# These run on the second session cluster, beside the first's (about half of the session cluster's time).
ON_THE_SECOND_CLUSTER = ("tests/e2e/test_trainer_jobs.py", "tests/e2e/test_hangs.py",
                         "tests/e2e/test_tutorial_scripts.py", "tests/e2e/test_data_service.py")


def on_a_local_cluster(nodeid: str) -> bool:
    return nodeid.startswith(ON_A_LOCAL_CLUSTER)


def cluster_group(nodeid: str) -> str | None:
    """Which group of cluster tests the test (or module) is in, or None for one on no cluster."""
    if nodeid.startswith(ON_CLUSTERS_OF_THEIR_OWN):
        return OWN
    if nodeid.startswith(ON_THE_SECOND_CLUSTER):
        return SECOND
    return SESSION if on_a_local_cluster(nodeid) else None
