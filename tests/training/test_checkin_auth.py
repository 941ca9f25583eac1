"""The check-in's words: a rank's answer proves it holds the job's secret, the chief's verdict that it does too;
a wrong, replayed or truncated line proves nothing."""

from __future__ import annotations

import pytest

from hpc_train.training import checkin_auth as auth

SECRET = bytes(range(32))


def exchange(secret: bytes = SECRET, name: str = "worker 1") -> tuple[bytes, bytes, bytes]:
    """(the chief's nonce, the rank's nonce, the rank's answer line) of one fresh exchange."""
    chief_nonce = auth.read_challenge(auth.challenge(auth.new_nonce()))
    assert chief_nonce is not None
    rank_nonce = auth.new_nonce()
    return chief_nonce, rank_nonce, auth.answer(secret, chief_nonce, rank_nonce, name)


def test_an_answer_with_the_secret_is_read_back_as_the_rank_and_its_nonce() -> None:
    chief_nonce, rank_nonce, line = exchange()
    assert line.endswith(b"\n") and len(line) <= auth.MAX_LINE
    assert auth.read_answer(SECRET, chief_nonce, line) == ("worker 1", rank_nonce)
    assert SECRET.hex().encode() not in line  # the secret itself never travels


def test_an_answer_made_with_another_secret_or_none_proves_nothing() -> None:
    chief_nonce, _, line = exchange(secret=bytes(32))
    assert auth.read_answer(SECRET, chief_nonce, line) is None
    _, _, unkeyed = exchange(secret=b"")
    assert auth.read_answer(SECRET, chief_nonce, unkeyed) is None


def test_a_replayed_answer_proves_nothing_to_a_fresh_challenge() -> None:
    _, _, recorded = exchange()
    fresh = auth.new_nonce()
    assert auth.read_answer(SECRET, fresh, recorded) is None


def test_a_truncated_or_altered_answer_proves_nothing() -> None:
    chief_nonce, _, line = exchange()
    for cut in (1, 10, len(line) // 2, len(line) - 2):
        assert auth.read_answer(SECRET, chief_nonce, line[:cut]) is None, cut
    name, nonce, proof = line.decode().rstrip("\n").split("\t")
    for altered in (f"worker 2\t{nonce}\t{proof}", f"{name}\t{nonce}\t{proof[:-1]}0", f"{name}\t{nonce[:-2]}\t{proof}",
                    f"{name}\t{nonce}\t{proof}\textra", "", "\t\t", "\xff\xfe garbage"):
        assert auth.read_answer(SECRET, chief_nonce, altered.encode()) is None, altered


def test_a_challenge_is_only_ours_with_a_whole_nonce() -> None:
    nonce = auth.new_nonce()
    assert auth.read_challenge(auth.challenge(nonce)) == nonce
    for line in (b"", b"SSH-2.0-OpenSSH_9.6\r\n", auth.challenge(nonce)[:-10], b"hpc-train-checkin-1 zz\n"):
        assert auth.read_challenge(line) is None, line


@pytest.mark.parametrize("said", ["go", "missing worker 2, ps 0"])
def test_the_verdict_proves_it_is_the_chiefs_for_this_exchange_only(said: str) -> None:
    chief_nonce, rank_nonce, _ = exchange()
    line = auth.verdict(SECRET, chief_nonce, rank_nonce, "worker 1", said)
    assert auth.read_verdict(SECRET, chief_nonce, rank_nonce, "worker 1", line) == said
    assert auth.read_verdict(bytes(32), chief_nonce, rank_nonce, "worker 1", line) is None  # a stranger's chief
    assert auth.read_verdict(SECRET, chief_nonce, auth.new_nonce(), "worker 1", line) is None  # replayed
    assert auth.read_verdict(SECRET, chief_nonce, rank_nonce, "worker 2", line) is None  # another rank's
    assert auth.read_verdict(SECRET, chief_nonce, rank_nonce, "worker 1", line[:-5]) is None  # truncated
    assert auth.read_verdict(SECRET, chief_nonce, rank_nonce, "worker 1", b"go\n") is None  # no proof
    forged = line.replace(said.encode(), b"go" if said != "go" else b"missing chief 0")
    assert auth.read_verdict(SECRET, chief_nonce, rank_nonce, "worker 1", forged) is None
