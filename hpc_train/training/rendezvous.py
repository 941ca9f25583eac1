"""Who is there: the ranks of a job meet before TensorFlow starts (or fail naming who is missing),
and the chief can wait for the others to have left.

TensorFlow waits for a missing peer for a very long time (a MultiWorkerMirrored
rank waited 28 minutes here, until cancelled). So before TensorFlow starts,
every rank checks in with the chief on the chief's own port, and the chief
answers "go" once all of them have, or, after `timeout` seconds, tells those
that came who did not; every rank then stops with an error naming the
missing ones. A star, not all-to-all: one connection per rank, so it scales
with the job. The chief closes its port before TensorFlow's server takes it.

The port listens on every interface (the ranks come from other nodes), so a rank is counted only once it has
proved that it holds the job's secret (checkin_auth.py: a challenge and answer, HMAC-SHA256), and a rank believes
only a verdict that proves the chief holds it too. The chief serves every connection at once (checkin.py): one
that proves nothing is dropped, and never delays, stops or is told about the others (docs/security.md).
"""

from __future__ import annotations

import errno
import resource
import socket
import sys
import time
from dataclasses import dataclass

from hpc_train.errors import HpcTrainError
from hpc_train.runs.secret import SECRET_ENV
from hpc_train.training import checkin_auth
from hpc_train.training.checkin import PENDING_LIMIT, Door
from hpc_train.training.rank import RankInfo
from hpc_train.version import PREFIX

RETRY_SECONDS = 0.2
# The chief's port was free when its rank started (bootstrap/portcheck.py): one taken since, by the time the chief
# listens (after TensorFlow's import), may be a brief holder (another process probing it, a socket closing); the chief
# waits this long for it before it fails the attempt.
BUSY_PORT_WAIT_SECONDS = 10.0
# Those who checked in hear the verdict a little after the chief's own deadline.
VERDICT_GRACE_SECONDS = 30.0


class PeersMissing(HpcTrainError):
    """Some ranks of the job did not start (or cannot be reached) in time."""


@dataclass(frozen=True)
class Meeting:
    """Who meets whom: every rank by name ("worker 1"), the chief's name and address."""

    me: str
    chief: str
    chief_address: str
    everyone: tuple[str, ...]

    @classmethod
    def of(cls, rank: RankInfo) -> "Meeting":
        everyone = tuple(name for name, _ in _addresses(rank))
        chief_role = "chief" if "chief" in rank.cluster else "worker"
        return cls(f"{rank.type} {rank.index}", f"{chief_role} 0", rank.cluster[chief_role][0], everyone)


def meet(rank: RankInfo, timeout: float, secret: bytes | None = None) -> None:
    """Return once every rank of the job has started; raise PeersMissing after `timeout` seconds.

    `secret`: the job's (runs/secret.py), which every rank proves it holds; None (a step started without the job
    body): anyone who reaches the chief's port could check in, which the chief says once."""
    meeting = Meeting.of(rank)
    if len(meeting.everyone) < 2:
        return
    if meeting.me == meeting.chief:
        if secret is None:
            print(f"{PREFIX}: warning: check-in without a job secret ({SECRET_ENV} is not set): any process that "
                  "reaches the chief's port may check in as a rank; start the step with `hpc-train job` "
                  "(docs/security.md)", file=sys.stderr, flush=True)
        _gather(meeting, timeout, secret)
    else:
        _check_in(meeting, timeout, secret)


def wait_for_departures(rank: RankInfo, timeout: float) -> list[str]:
    """Wait until no other rank's server answers (their processes have ended); return those still there.

    The chief of a stopped MultiWorkerMirrored job waits so before it requeues
    the job, which would otherwise end the others with SIGTERM as they exit.
    """
    others = [(name, address) for name, address in _addresses(rank) if name != f"{rank.type} {rank.index}"]
    deadline = time.monotonic() + timeout
    while True:
        staying = [name for name, address in others if reachable(address)]
        if not staying or time.monotonic() >= deadline:
            return staying
        time.sleep(RETRY_SECONDS)


def reachable(address: str, timeout: float = 1.0) -> bool:
    """Whether something accepts connections at host:port."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except OSError:
        return False


def _addresses(rank: RankInfo) -> list[tuple[str, str]]:
    return [(f"{role} {index}", address) for role in _role_order(rank.cluster)
            for index, address in enumerate(rank.cluster[role])]


def _gather(meeting: Meeting, timeout: float, secret: bytes | None) -> None:
    expected = set(meeting.everyone) - {meeting.chief}
    _allow_open_files(len(expected) + PENDING_LIMIT + 16)
    listener = _listen(meeting.chief_address)
    door = Door(listener, secret, expected)
    deadline = time.monotonic() + timeout
    try:
        while set(door.arrived) != expected and time.monotonic() < deadline:
            door.serve(min(1.0, max(0.0, deadline - time.monotonic())))
        missing = sorted(expected - set(door.arrived), key=meeting.everyone.index)
        door.tell("go" if not missing else f"missing {', '.join(missing)}")
    finally:
        door.close()
    if missing:
        raise PeersMissing(f"{_describe(missing)} did not start within {timeout:.0f} s; see their logs (they may "
                           "have failed, or their nodes be unreachable), or raise startup_timeout")


def _check_in(meeting: Meeting, timeout: float, secret: bytes | None) -> None:
    """Check in with the chief and hear its verdict. A connection closed before the verdict (the chief dropped
    it, too slow on a loaded node) is not counted: the rank connects again until its deadline."""
    deadline = time.monotonic() + timeout
    heard = False  # whether the chief ever answered
    while time.monotonic() < deadline:
        connection = _connect_until(meeting.chief_address, deadline)
        if connection is None:
            break
        with connection:
            said, spoke = _ask(connection, meeting, secret, deadline)
        heard = heard or spoke
        if said is not None:
            return _hear(said, meeting, timeout)
        time.sleep(RETRY_SECONDS)
    if not heard:
        raise PeersMissing(f"the chief ({meeting.chief} at {meeting.chief_address}) did not start within "
                           f"{timeout:.0f} s; see its log, or raise startup_timeout")
    raise PeersMissing(f"the chief ({meeting.chief} at {meeting.chief_address}) gave no answer at start; see its log")


def _ask(connection: socket.socket, meeting: Meeting, secret: bytes | None,
         deadline: float) -> tuple[str | None, bool]:
    """(the chief's verdict, or None when the connection ended without one; whether the chief challenged us)."""
    lines = connection.makefile("rb")
    try:
        connection.settimeout(max(1.0, deadline - time.monotonic()))
        chief_nonce = checkin_auth.read_challenge(lines.readline(checkin_auth.MAX_LINE + 1))
        if chief_nonce is None:
            return None, False
        rank_nonce = checkin_auth.new_nonce()
        connection.sendall(checkin_auth.answer(secret, chief_nonce, rank_nonce, meeting.me))
        connection.settimeout(max(1.0, deadline - time.monotonic()) + VERDICT_GRACE_SECONDS)
        line = lines.readline(checkin_auth.MAX_LINE + 1)
    except OSError:
        return None, False
    if not line.endswith(b"\n"):
        return None, True  # closed before the verdict: dropped, not counted
    said = checkin_auth.read_verdict(secret, chief_nonce, rank_nonce, meeting.me, line)
    if said is None:
        raise HpcTrainError(f"the check-in at {meeting.chief_address} answered without proving it is this job's "
                            f"chief ({meeting.chief}): another job's, or a stranger on its port; see the chief's log")
    return said, True


def _hear(verdict: str, meeting: Meeting, timeout: float) -> None:
    if verdict == "go":
        return
    if verdict.startswith("missing "):
        missing = verdict[len("missing "):].split(", ")
        raise PeersMissing(f"{_describe(missing)} did not start within {timeout:.0f} s (the chief says); see "
                           "their logs, or raise startup_timeout")
    raise PeersMissing(f"the chief ({meeting.chief} at {meeting.chief_address}) gave no answer at start; see its log")


def _connect_until(address: str, deadline: float) -> socket.socket | None:
    host, _, port = address.rpartition(":")
    while time.monotonic() < deadline:
        try:
            return socket.create_connection((host, int(port)), timeout=max(RETRY_SECONDS, 1.0))
        except OSError:
            time.sleep(RETRY_SECONDS)
    return None


def _listen(address: str, wait: float = BUSY_PORT_WAIT_SECONDS) -> socket.socket:
    port = int(address.rpartition(":")[2])
    deadline = time.monotonic() + wait
    while True:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TensorFlow binds it right after us
        try:
            listener.bind(("", port))
            break
        except OSError as error:
            listener.close()
            if error.errno == errno.EADDRINUSE and time.monotonic() < deadline:
                time.sleep(RETRY_SECONDS)
                continue
            raise HpcTrainError(f"cannot listen on port {port} ({error.strerror}): another job on this node? "
                                "pass --port-base with a free range, or use srun --resv-ports") from None
    listener.listen(1024)
    return listener


def _allow_open_files(needed: int) -> None:
    """The chief holds one connection per rank: raise the soft open-files limit towards the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed if hard == resource.RLIM_INFINITY else min(needed, hard),
                                                    hard))


def _role_order(cluster: dict[str, list[str]]) -> list[str]:
    known = [role for role in ("chief", "ps", "worker") if role in cluster]
    return known + sorted(set(cluster) - set(known))


def _describe(names: list[str], shown: int = 8) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more
