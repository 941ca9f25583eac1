"""Who is there: every task meets the chief before TensorFlow starts, or the missing ones are named."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import pytest

from hpc_train.training.rank import RankInfo
from hpc_train.training.rendezvous import Meeting, PeersMissing, meet, reachable, wait_for_departures
from tests.net import free_port_block


def ps_cluster() -> dict[str, list[str]]:
    base = free_port_block(4)
    return {"chief": [f"127.0.0.1:{base}"], "ps": [f"127.0.0.1:{base + 1}"],
            "worker": [f"127.0.0.1:{base + 2}", f"127.0.0.1:{base + 3}"]}


def in_threads(tasks: list[tuple[RankInfo, float]], timeout: float) -> dict[str, BaseException | None]:
    """Run meet() for each (task, start delay) at once; name -> the error it raised, or None."""
    results: dict[str, BaseException | None] = {}

    def attend(rank: RankInfo, delay: float) -> None:
        time.sleep(delay)
        try:
            meet(rank, timeout)
            results[f"{rank.type} {rank.index}"] = None
        except BaseException as error:  # noqa: BLE001 (reported to the test)
            results[f"{rank.type} {rank.index}"] = error

    threads = [threading.Thread(target=attend, args=pair) for pair in tasks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout + 40)
    assert not any(thread.is_alive() for thread in threads), "meet() hung"
    return results


def test_the_chief_and_order_of_a_meeting() -> None:
    cluster = ps_cluster()
    meeting = Meeting.of(RankInfo("worker", 1, cluster))
    assert (meeting.me, meeting.chief, meeting.chief_address) == ("worker 1", "chief 0", cluster["chief"][0])
    assert meeting.everyone == ("chief 0", "ps 0", "worker 0", "worker 1")
    assert Meeting.of(RankInfo("worker", 1, {"worker": ["a:1", "b:2"]})).chief == "worker 0"


def test_tasks_starting_at_different_times_all_get_through() -> None:
    cluster = ps_cluster()
    tasks = [(RankInfo("worker", 1, cluster), 0.0), (RankInfo("ps", 0, cluster), 0.5),
             (RankInfo("chief", 0, cluster), 1.5), (RankInfo("worker", 0, cluster), 2.5)]
    assert in_threads(tasks, timeout=20) == {"chief 0": None, "ps 0": None, "worker 0": None, "worker 1": None}


def test_a_task_that_never_starts_is_named_by_everyone_after_the_timeout() -> None:
    cluster = ps_cluster()
    started = time.monotonic()
    results = in_threads([(RankInfo("chief", 0, cluster), 0.0), (RankInfo("ps", 0, cluster), 0.0),
                          (RankInfo("worker", 0, cluster), 0.0)], timeout=2)
    assert time.monotonic() - started < 10
    assert all(isinstance(error, PeersMissing) for error in results.values()), results
    assert str(results["chief 0"]).startswith("worker 1 did not start within 2 s; see their logs")
    for name in ("ps 0", "worker 0"):  # those who came hear who did not
        assert str(results[name]).startswith("worker 1 did not start within 2 s (the chief says)")


def test_a_chief_that_never_starts_is_named() -> None:
    cluster = {"worker": [f"127.0.0.1:{free_port_block(1)}", "127.0.0.1:1"]}
    with pytest.raises(PeersMissing, match=r"^the chief \(worker 0 at 127\.0\.0\.1:\d+\) did not start within 1 s"):
        meet(RankInfo("worker", 1, cluster), timeout=1)


def test_one_task_meets_nobody() -> None:
    meet(RankInfo("worker", 0, {"worker": ["127.0.0.1:1"]}), timeout=0.1)


def test_the_chiefs_port_is_free_again_for_tensorflow_afterwards() -> None:
    base = free_port_block(2)
    cluster = {"worker": [f"127.0.0.1:{base}", f"127.0.0.1:{base + 1}"]}
    assert in_threads([(RankInfo("worker", 0, cluster), 0.0), (RankInfo("worker", 1, cluster), 0.0)], 10) == {
        "worker 0": None, "worker 1": None}
    with socket.socket() as server:  # as TensorFlow's server will
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("0.0.0.0", base))


def listening(port: int) -> tuple[socket.socket, Callable[[], None]]:
    server = socket.socket()
    server.bind(("127.0.0.1", port))
    server.listen()
    return server, server.close


def test_the_chief_waits_for_the_others_to_leave_then_names_who_stays() -> None:
    base = free_port_block(3)
    cluster = {"worker": [f"127.0.0.1:{base + index}" for index in range(3)]}
    server_1, close_1 = listening(base + 1)
    server_2, close_2 = listening(base + 2)
    assert reachable(cluster["worker"][1])
    threading.Timer(0.5, close_1).start()
    started = time.monotonic()
    assert wait_for_departures(RankInfo("worker", 0, cluster), timeout=2) == ["worker 2"]
    assert 1.9 < time.monotonic() - started < 5
    close_2()
    assert wait_for_departures(RankInfo("worker", 0, cluster), timeout=2) == []
