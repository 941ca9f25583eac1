"""The groups of end-to-end files (tests/clustergroups.py): every file in one, each named file there, and each
group with its lock and, for a session cluster's, its cluster."""

from __future__ import annotations

from pathlib import Path

from tests.clustergroups import (ON_CLUSTERS_OF_THEIR_OWN, ON_THE_SECOND_CLUSTER, ON_THE_THIRD_CLUSTER, OWN, SECOND,
                                 SESSION, THIRD, cluster_group, worker_group)
from tests.conftest import LOCAL_CLUSTER_LOCKS
from tests.e2e.conftest import CLUSTERS, session_group

ROOT = Path(__file__).resolve().parents[1]


def test_every_named_file_exists_and_is_in_one_group() -> None:
    named = [*ON_CLUSTERS_OF_THEIR_OWN, *ON_THE_SECOND_CLUSTER, *ON_THE_THIRD_CLUSTER]
    assert len(named) == len(set(named)) and all((ROOT / name).is_file() for name in named), named
    groups = {path.relative_to(ROOT).as_posix(): cluster_group(path.relative_to(ROOT).as_posix())
              for path in (ROOT / "tests" / "e2e").glob("test_*.py")}
    assert set(groups.values()) == {SESSION, SECOND, THIRD, OWN}, groups
    assert cluster_group("tests/login/test_submission.py::test_logs_list_and_cancel") is None


def test_the_third_clusters_files_share_a_worker_with_clusters_of_their_own_below_five_workers() -> None:
    test = f"{ON_THE_THIRD_CLUSTER[0]}::test_x"
    assert (worker_group(test, 3), worker_group(test, 4), worker_group(test, 5)) == (OWN, OWN, THIRD)
    assert session_group(test) == THIRD  # its cluster stays its own, whichever worker runs it
    assert worker_group(f"{ON_THE_SECOND_CLUSTER[0]}::test_x", 3) == SECOND
    assert set(LOCAL_CLUSTER_LOCKS) == {SESSION, SECOND, THIRD, OWN}
    assert len(set(LOCAL_CLUSTER_LOCKS.values())) == 4
    assert set(CLUSTERS) == {SESSION, SECOND, THIRD} and len({spec.directory for spec in CLUSTERS.values()}) == 3
