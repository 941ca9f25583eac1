"""Who is there: every task meets the chief before TensorFlow starts, or the missing ones are named."""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest

from hpc_train.errors import HpcTrainError
from hpc_train.training import checkin_auth as auth
from hpc_train.training import rendezvous
from hpc_train.training.checkin import Door
from hpc_train.training.rank import RankInfo
from hpc_train.training.rendezvous import Meeting, PeersMissing, meet, reachable, wait_for_departures
from tests.net import free_port_block

Gate = Callable[[], object]  # what a rank waits for before it starts (None: it starts at once)


def ps_cluster() -> dict[str, list[str]]:
    base = free_port_block(4)
    return {"chief": [f"127.0.0.1:{base}"], "ps": [f"127.0.0.1:{base + 1}"],
            "worker": [f"127.0.0.1:{base + 2}", f"127.0.0.1:{base + 3}"]}


def in_threads(tasks: list[tuple[RankInfo, Gate | None]], timeout: float, secret: bytes | None = None,
               within: float | None = None) -> dict[str, BaseException | None]:
    """Run meet() for each (task, what it waits for before it starts) at once, each in a thread named as the rank;
    name -> the error it raised, or None. `within`: how long they may take in all (default: the timeout and 40 s)."""
    results: dict[str, BaseException | None] = {}

    def attend(rank: RankInfo, gate: Gate | None) -> None:
        if gate is not None:
            assert gate(), f"{rank.type} {rank.index} waited for its turn in vain"
        try:
            meet(rank, timeout, secret)
            results[f"{rank.type} {rank.index}"] = None
        except BaseException as error:  # noqa: BLE001 (reported to the test)
            results[f"{rank.type} {rank.index}"] = error

    threads = [threading.Thread(target=attend, args=pair, name=f"{pair[0].type} {pair[0].index}") for pair in tasks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout + 40 if within is None else within)
    assert not any(thread.is_alive() for thread in threads), "meet() hung"
    return results


class Connections:
    """socket.create_connection as the ranks call it, counted by (the calling thread's name, address): refused
    and made; a test waits on the counts for a rank to have tried, or reached the chief."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.real = socket.create_connection
        self.refused: Counter[tuple[str, str]] = Counter()
        self.made: Counter[tuple[str, str]] = Counter()
        self._changed = threading.Condition()
        monkeypatch.setattr(socket, "create_connection", self)

    def __call__(self, address: tuple[str, int], *args: object, **kwargs: object) -> socket.socket:
        key = (threading.current_thread().name, f"{address[0]}:{address[1]}")
        try:
            connection = self.real(address, *args, **kwargs)
        except OSError:
            self._count(self.refused, key)
            raise
        self._count(self.made, key)
        return connection

    def _count(self, counter: Counter[tuple[str, str]], key: tuple[str, str]) -> None:
        with self._changed:
            counter[key] += 1
            self._changed.notify_all()

    def until(self, predicate: Callable[[], bool]) -> Callable[[], bool]:
        """A gate: wait (up to 30 s) until `predicate` holds."""
        def gate() -> bool:
            with self._changed:
                return self._changed.wait_for(predicate, timeout=30)
        return gate


def test_the_chief_and_order_of_a_meeting() -> None:
    cluster = ps_cluster()
    meeting = Meeting.of(RankInfo("worker", 1, cluster))
    assert (meeting.me, meeting.chief, meeting.chief_address) == ("worker 1", "chief 0", cluster["chief"][0])
    assert meeting.everyone == ("chief 0", "ps 0", "worker 0", "worker 1")
    assert Meeting.of(RankInfo("worker", 1, {"worker": ["a:1", "b:2"]})).chief == "worker 0"


def test_tasks_starting_at_different_times_all_get_through(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = ps_cluster()
    chief = cluster["chief"][0]
    connections = Connections(monkeypatch)
    # worker 1 first; ps once worker 1 found no chief; the chief once ps did too; worker 0 once both reached it.
    tasks = [(RankInfo("worker", 1, cluster), None),
             (RankInfo("ps", 0, cluster), connections.until(lambda: connections.refused["worker 1", chief] > 0)),
             (RankInfo("chief", 0, cluster), connections.until(lambda: connections.refused["ps 0", chief] > 0)),
             (RankInfo("worker", 0, cluster), connections.until(
                 lambda: connections.made["worker 1", chief] > 0 and connections.made["ps 0", chief] > 0))]
    assert in_threads(tasks, timeout=20) == {"chief 0": None, "ps 0": None, "worker 0": None, "worker 1": None}
    assert connections.refused["worker 1", chief] and connections.refused["ps 0", chief]  # came before the chief


def test_a_task_that_never_starts_is_named_by_everyone_after_the_timeout() -> None:
    cluster = ps_cluster()
    results = in_threads([(RankInfo("chief", 0, cluster), None), (RankInfo("ps", 0, cluster), None),
                          (RankInfo("worker", 0, cluster), None)], timeout=2, within=10)  # not much after 2 s
    assert all(isinstance(error, PeersMissing) for error in results.values()), results
    assert str(results["chief 0"]).startswith("worker 1 did not start within 2 s; see their logs")
    for name in ("ps 0", "worker 0"):  # those who came hear who did not
        assert str(results[name]).startswith("worker 1 did not start within 2 s (the chief says)")


def test_a_chief_that_never_starts_is_named() -> None:
    cluster = {"worker": [f"127.0.0.1:{free_port_block(1)}", "127.0.0.1:1"]}
    with pytest.raises(PeersMissing, match=r"^the chief \(worker 0 at 127\.0\.0\.1:\d+\) did not start within 1 s"):
        meet(RankInfo("worker", 1, cluster), timeout=1)


def test_one_task_meets_nobody(monkeypatch: pytest.MonkeyPatch) -> None:
    connections = Connections(monkeypatch)
    listened: list[str] = []
    monkeypatch.setattr(rendezvous, "Door", lambda *args: listened.append("a door") or Door(*args))
    assert meet(RankInfo("worker", 0, {"worker": ["127.0.0.1:1"]}), timeout=0.1) is None
    assert (connections.refused, connections.made, listened) == (Counter(), Counter(), [])  # no one to meet


def test_the_chiefs_port_is_free_again_for_tensorflow_afterwards() -> None:
    base = free_port_block(2)
    cluster = {"worker": [f"127.0.0.1:{base}", f"127.0.0.1:{base + 1}"]}
    assert in_threads([(RankInfo("worker", 0, cluster), None), (RankInfo("worker", 1, cluster), None)], 10) == {
        "worker 0": None, "worker 1": None}
    with socket.socket() as server:  # as TensorFlow's server will
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("0.0.0.0", base))


def listening(port: int) -> tuple[socket.socket, Callable[[], None]]:
    server = socket.socket()
    server.bind(("127.0.0.1", port))
    server.listen()
    return server, server.close


class Clock:
    """time, as wait_for_departures sees it: its sleeps move this clock, at once; `at_first_sleep` runs once."""

    def __init__(self, at_first_sleep: Callable[[], None]) -> None:
        self.now = 0.0
        self.at_first_sleep: Callable[[], None] | None = at_first_sleep

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        if self.at_first_sleep is not None:
            self.at_first_sleep()  # worker 1 leaves once the chief has seen it there
            self.at_first_sleep = None
        self.now += seconds


def test_the_chief_waits_for_the_others_to_leave_then_names_who_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    base = free_port_block(3)
    cluster = {"worker": [f"127.0.0.1:{base + index}" for index in range(3)]}
    server_1, close_1 = listening(base + 1)
    server_2, close_2 = listening(base + 2)
    assert reachable(cluster["worker"][1])
    clock = Clock(close_1)
    monkeypatch.setattr(rendezvous, "time", clock)
    assert wait_for_departures(RankInfo("worker", 0, cluster), timeout=2) == ["worker 2"]
    assert clock.at_first_sleep is None  # worker 1 was there at first, and left
    assert 2.0 <= clock.now < 2.0 + 2 * rendezvous.RETRY_SECONDS  # its whole timeout, and no more
    close_2()
    assert wait_for_departures(RankInfo("worker", 0, cluster), timeout=2) == []


SECRET = bytes(range(32))


def stranger(address: str, behaviour: str, heard: list[bytes], challenged: Callable[[], None] = lambda: None) -> None:
    """A process without the secret at the chief's port during the start; what it heard, into `heard`
    (`challenged` is called once the chief has challenged it)."""
    host, _, port = address.rpartition(":")
    for _ in range(100):  # until the chief listens
        try:
            connection = socket.create_connection((host, int(port)), timeout=10)
            break
        except OSError:
            time.sleep(0.05)
    else:
        return
    with connection:
        lines = connection.makefile("rb")
        nonce = auth.read_challenge(lines.readline())
        assert nonce is not None
        challenged()
        recorded = auth.answer(SECRET, auth.new_nonce(), auth.new_nonce(), "worker 1")  # another exchange's
        said = {"idle": b"", "garbage": b"\x00\xffGET / HTTP/1.0\r\n\r\n", "name only": b"worker 1\n",
                "no secret": auth.answer(None, nonce, auth.new_nonce(), "worker 1"),
                "wrong secret": auth.answer(bytes(32), nonce, auth.new_nonce(), "worker 1"),
                "replayed": recorded, "truncated": recorded[:40], "too long": b"w" * 5000}.get(behaviour, b"")
        try:
            if behaviour == "trickle":
                for byte in b"worker 1\tslow":
                    connection.sendall(bytes([byte]))
                    time.sleep(0.3)
            else:
                connection.sendall(said)
                if behaviour == "truncated":
                    connection.shutdown(socket.SHUT_WR)
            heard.append(lines.read())  # what the chief tells it before it drops it: nothing
        except OSError:
            heard.append(b"")


BEHAVIOURS = ["idle", "trickle", "garbage", "name only", "no secret", "wrong secret", "replayed", "truncated",
              "too long"]


def test_strangers_at_the_check_in_cannot_join_delay_or_stop_it(capfd: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = ps_cluster()
    heard: list[bytes] = []
    challenged: list[str] = []
    all_in = threading.Event()

    def one_in(behaviour: str) -> None:
        challenged.append(behaviour)
        if len(challenged) == len(BEHAVIOURS) * 3:
            all_in.set()

    strangers = [threading.Thread(target=stranger, args=(cluster["chief"][0], behaviour, heard,
                                                         lambda behaviour=behaviour: one_in(behaviour)), daemon=True)
                 for behaviour in BEHAVIOURS * 3]
    drops: list[str] = []
    drop = Door._drop
    monkeypatch.setattr(Door, "_drop", lambda door, caller, why: drops.append(why) or drop(door, caller, why))
    for thread in strangers:
        thread.start()
    # They reach the chief first: the other ranks come once the chief has challenged every one of them.
    tasks = [(RankInfo("chief", 0, cluster), None), (RankInfo("ps", 0, cluster), lambda: all_in.wait(30)),
             (RankInfo("worker", 0, cluster), lambda: all_in.wait(30)),
             (RankInfo("worker", 1, cluster), lambda: all_in.wait(30))]
    assert in_threads(tasks, timeout=30, secret=SECRET) == {
        "chief 0": None, "ps 0": None, "worker 0": None, "worker 1": None}
    # Not after the idle strangers are dropped (5 s after they came), nor the timeout: none was dropped for that.
    assert drops and not [why for why in drops if why.startswith("no answer within")]
    for thread in strangers:
        thread.join(timeout=15)
    assert len(heard) == len(strangers) and set(heard) == {b""}  # not a word to any of them
    dropped = [line for line in capfd.readouterr().err.splitlines() if "check-in: dropped" in line]
    assert dropped == ["hpc-train: check-in: dropped a connection from 127.0.0.1 that did not prove it belongs to "
                       f"the job ({dropped[0].split('(')[1].split(')')[0]}); not counted (docs/security.md)"]


def test_a_rank_without_the_secret_is_not_counted_and_the_job_names_it_missing() -> None:
    base = free_port_block(2)
    cluster = {"worker": [f"127.0.0.1:{base}", f"127.0.0.1:{base + 1}"]}
    results: dict[int, BaseException | None] = {}

    def attend(index: int, secret: bytes) -> None:
        try:
            meet(RankInfo("worker", index, cluster), 2, secret)
            results[index] = None
        except BaseException as error:  # noqa: BLE001 (reported to the test)
            results[index] = error

    threads = [threading.Thread(target=attend, args=(0, SECRET)), threading.Thread(target=attend, args=(1, bytes(32)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert str(results[0]).startswith("worker 1 did not start within 2 s; see their logs")
    assert str(results[1]).startswith("the chief (worker 0 at 127.0.0.1:")  # never told go


def test_a_rank_believes_no_verdict_from_a_stranger_on_the_chiefs_port() -> None:
    port = free_port_block(2)
    cluster = {"worker": [f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}"]}
    impostor = socket.create_server(("127.0.0.1", port))

    def pretend() -> None:
        connection, _ = impostor.accept()
        with connection:
            connection.sendall(auth.challenge(auth.new_nonce()))
            connection.makefile("rb").readline()
            connection.sendall(b"go\t" + b"0" * 64 + b"\n")

    threading.Thread(target=pretend, daemon=True).start()
    try:
        with pytest.raises(HpcTrainError, match=r"answered without proving it is this job's chief \(worker 0\)"):
            meet(RankInfo("worker", 1, cluster), 10, SECRET)
    finally:
        impostor.close()


def test_a_chief_without_a_secret_says_so_once(capfd: pytest.CaptureFixture[str]) -> None:
    base = free_port_block(2)
    cluster = {"worker": [f"127.0.0.1:{base}", f"127.0.0.1:{base + 1}"]}
    assert in_threads([(RankInfo("worker", 0, cluster), None), (RankInfo("worker", 1, cluster), None)], 10) == {
        "worker 0": None, "worker 1": None}
    warned = [line for line in capfd.readouterr().err.splitlines() if "without a job secret" in line]
    assert warned == ["hpc-train: warning: check-in without a job secret (HPC_TRAIN_SECRET_FILE is not set): any "
                      "process that reaches the chief's port may check in as a rank; start the step with "
                      "`hpc-train job` (docs/security.md)"]


def test_the_chief_waits_for_its_port_held_briefly_and_names_one_held_throughout() -> None:
    port = free_port_block(1)
    holder = socket.create_server(("", port))  # (listening: no bind of the port passes it, SO_REUSEADDR or not)
    letting_go = threading.Event()

    def free_it() -> None:
        time.sleep(0.5)  # the holder is brief: it lets go while the chief waits
        letting_go.set()
        holder.close()

    freeing = threading.Thread(target=free_it)
    freeing.start()
    listener = rendezvous._listen(f"127.0.0.1:{port}", wait=30)
    freeing.join()
    assert letting_go.is_set() and listener.getsockname()[1] == port
    with listener, pytest.raises(HpcTrainError, match=rf"cannot listen on port {port} \(Address already in use\): "
                                 "another job on this node\\? pass --port-base"):
        rendezvous._listen(f"127.0.0.1:{port}", wait=0.3)  # held throughout (by the first listener)
