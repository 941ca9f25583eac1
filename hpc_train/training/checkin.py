"""The chief's door at the check-in: every connection served at once, a rank counted only once it has proved it
belongs to the job (checkin_auth.py), any other connection dropped without a word.

One selector loop, nothing blocking: a stranger that connects and says nothing, or a byte at a time, holds only
its own connection, which is dropped ANSWER_SECONDS after it came (or sooner, beyond PENDING_LIMIT unproven
connections at once); the ranks meanwhile are served as they come. A dropped connection is logged once per host,
to the chief's stderr; it is never counted and never told anything, nor is any rank told of it.
"""

from __future__ import annotations

import selectors
import socket
import sys
import time
from dataclasses import dataclass, field

from hpc_train.training import checkin_auth
from hpc_train.version import PREFIX

ANSWER_SECONDS = 5.0  # a connection has this long to prove itself, from when it came
PENDING_LIMIT = 64  # unproven connections held at once; the oldest goes first beyond that
VERDICT_SECONDS = 5.0  # to hand a rank its verdict


@dataclass
class Caller:
    """One connection not yet proved: what it was asked, what it has sent so far."""

    connection: socket.socket
    host: str
    nonce: bytes
    deadline: float
    received: bytearray = field(default_factory=bytearray)


@dataclass
class Arrival:
    """A rank that proved it belongs to the job: its connection and the nonces its verdict is bound to."""

    connection: socket.socket
    chief_nonce: bytes
    rank_nonce: bytes


class Door:
    """The chief's listener and the connections at it: `serve` a while, then `tell` every rank the verdict."""

    def __init__(self, listener: socket.socket, secret: bytes | None, expected: set[str]) -> None:
        listener.setblocking(False)
        self.listener, self.secret, self.expected = listener, secret, expected
        self.arrived: dict[str, Arrival] = {}
        self.pending: dict[socket.socket, Caller] = {}
        self.logged: set[str] = set()  # hosts whose dropped connection was logged already
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ)

    def serve(self, wait: float) -> None:
        """Accept, read and judge what comes within `wait` seconds (less when an unproven one's time ends)."""
        soonest = min((caller.deadline for caller in self.pending.values()), default=time.monotonic() + wait)
        for key, _ in self.selector.select(timeout=max(0.0, min(wait, soonest - time.monotonic()))):
            if key.fileobj is self.listener:
                self._accept()
            elif key.fileobj in self.pending:
                self._read(self.pending[key.fileobj])  # type: ignore[index]
        now = time.monotonic()
        for caller in [caller for caller in self.pending.values() if caller.deadline <= now]:
            self._drop(caller, f"no answer within {ANSWER_SECONDS:.0f} s")

    def tell(self, said: str) -> None:
        """Every rank that proved itself hears the verdict, proved to come from the chief."""
        for name, arrival in self.arrived.items():
            line = checkin_auth.verdict(self.secret, arrival.chief_nonce, arrival.rank_nonce, name, said)
            try:
                arrival.connection.setblocking(True)
                arrival.connection.settimeout(VERDICT_SECONDS)
                arrival.connection.sendall(line)
            except OSError:
                pass  # that rank is gone; it learns nothing, and fails on its own

    def close(self) -> None:
        for connection in [*(arrival.connection for arrival in self.arrived.values()), *self.pending, self.listener]:
            connection.close()
        self.selector.close()

    def _accept(self) -> None:
        for _ in range(PENDING_LIMIT):  # what is waiting now, not forever: the ranks' connections are read too
            try:
                connection, address = self.listener.accept()
            except OSError:  # none left (or out of files: those wait in the backlog)
                return
            if len(self.pending) >= PENDING_LIMIT:
                self._drop(min(self.pending.values(), key=lambda caller: caller.deadline), "too many at once")
            caller = Caller(connection, str(address[0]), checkin_auth.new_nonce(), time.monotonic() + ANSWER_SECONDS)
            try:
                connection.setblocking(False)
                connection.send(checkin_auth.challenge(caller.nonce))  # a few bytes: a fresh socket takes them
            except OSError:
                connection.close()
                continue
            self.pending[connection] = caller
            self.selector.register(connection, selectors.EVENT_READ)

    def _read(self, caller: Caller) -> None:
        try:
            data = caller.connection.recv(checkin_auth.MAX_LINE + 1 - len(caller.received))
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            return self._drop(caller, "closed before it answered")
        caller.received += data
        if b"\n" not in caller.received:
            if len(caller.received) > checkin_auth.MAX_LINE:
                self._drop(caller, "an answer too long")
            return
        proved = checkin_auth.read_answer(self.secret, caller.nonce, bytes(caller.received).split(b"\n", 1)[0])
        if proved is None or proved[0] not in self.expected:
            return self._drop(caller, "a wrong answer")
        self._forget(caller)
        name, rank_nonce = proved
        if name in self.arrived:  # the same rank again (its first connection broke): the newer one is heard
            self.arrived[name].connection.close()
        self.arrived[name] = Arrival(caller.connection, caller.nonce, rank_nonce)

    def _drop(self, caller: Caller, why: str) -> None:
        self._forget(caller)
        caller.connection.close()
        if caller.host not in self.logged:
            self.logged.add(caller.host)
            print(f"{PREFIX}: check-in: dropped a connection from {caller.host} that did not prove it belongs to "
                  f"the job ({why}); not counted (docs/security.md)", file=sys.stderr, flush=True)

    def _forget(self, caller: Caller) -> None:
        del self.pending[caller.connection]
        self.selector.unregister(caller.connection)
