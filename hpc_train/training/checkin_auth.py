"""The check-in's words (pure): how a rank proves to the chief that it belongs to the job, and the chief to it.

Over one connection, three lines, each at most MAX_LINE bytes:

    chief -> rank   `hpc-train-checkin-1 CHIEF_NONCE`                     a fresh nonce per connection
    rank  -> chief  `NAME<TAB>RANK_NONCE<TAB>HMAC(secret, rank, both nonces, NAME)`
    chief -> rank   `VERDICT<TAB>HMAC(secret, chief, both nonces, NAME, VERDICT)`   `go`, or `missing NAME, ...`

Both nonces are 32 random bytes (hex), and every MAC covers both: an answer recorded from one exchange proves
nothing in another (a replay), and only the chief, who holds the secret too, can say "go" to a rank. A job without
a secret (a step started without the job body) speaks the same words with an empty key, which proves nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

PROTOCOL = "hpc-train-checkin-1"
NONCE_BYTES = 32
MAX_LINE = 512  # any line longer is not ours: the connection is dropped
SEPARATOR = "\t"


def new_nonce() -> bytes:
    return secrets.token_bytes(NONCE_BYTES)


def challenge(chief_nonce: bytes) -> bytes:
    """The chief's first line."""
    return f"{PROTOCOL} {chief_nonce.hex()}\n".encode()


def read_challenge(line: bytes) -> bytes | None:
    """The chief's nonce from its first line; None when it is not one."""
    words = _text(line).split(" ")
    if len(words) != 2 or words[0] != PROTOCOL:
        return None
    return _nonce(words[1])


def answer(secret: bytes | None, chief_nonce: bytes, rank_nonce: bytes, name: str) -> bytes:
    """A rank's answer to the challenge: its name, its own nonce, and the proof."""
    proof = _mac(secret, "rank", chief_nonce, rank_nonce, name)
    return SEPARATOR.join((name, rank_nonce.hex(), proof)).encode() + b"\n"


def read_answer(secret: bytes | None, chief_nonce: bytes, line: bytes) -> tuple[str, bytes] | None:
    """(name, the rank's nonce) from an answer that proves it belongs to the job; None for any other line."""
    fields = _text(line).split(SEPARATOR)
    if len(fields) != 3:
        return None
    name, rank_nonce, proof = fields[0], _nonce(fields[1]), fields[2]
    if rank_nonce is None or not hmac.compare_digest(proof.encode(), _mac(secret, "rank", chief_nonce, rank_nonce,
                                                                          name).encode()):
        return None
    return name, rank_nonce


def verdict(secret: bytes | None, chief_nonce: bytes, rank_nonce: bytes, name: str, said: str) -> bytes:
    """The chief's last line to one rank: what it says ("go", "missing ..."), and the proof it is the chief."""
    return f"{said}{SEPARATOR}{_mac(secret, 'chief', chief_nonce, rank_nonce, name, said)}\n".encode()


def read_verdict(secret: bytes | None, chief_nonce: bytes, rank_nonce: bytes, name: str, line: bytes) -> str | None:
    """What the chief said; None when the line does not prove it comes from the job's chief."""
    said, _, proof = _text(line).rpartition(SEPARATOR)
    if not said or not hmac.compare_digest(proof.encode(), _mac(secret, "chief", chief_nonce, rank_nonce, name,
                                                                said).encode()):
        return None
    return said


def _mac(secret: bytes | None, who: str, *parts: bytes | str) -> str:
    """HMAC-SHA256 over `who` and the parts, each length-prefixed (no two lists of parts read alike)."""
    message = b"".join(len(data).to_bytes(4, "big") + data
                       for data in (PROTOCOL.encode(), who.encode(),
                                    *(part.encode() if isinstance(part, str) else part for part in parts)))
    return hmac.new(secret or b"", message, hashlib.sha256).hexdigest()


def _text(line: bytes) -> str:
    return line.decode("utf-8", errors="replace").rstrip("\r\n")


def _nonce(text: str) -> bytes | None:
    try:
        nonce = bytes.fromhex(text)
    except ValueError:
        return None
    return nonce if len(nonce) == NONCE_BYTES else None
