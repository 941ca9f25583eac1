"""`submit --remote a,b`: what `sbatch --test-only` answered, which cluster wins, the one line that says so (pure),
and the remotes `--remote` names."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from hpc_train.errors import HpcTrainError
from hpc_train.remote import config
from hpc_train.remote.earliest import Estimate, choose, names, nothing_line, parse_start, skipped_line, summary

SAID = ("sbatch: Job 1234 to start at 2026-11-26T04:00:00 using 2 processors on nodes node[1-2] in partition "
        "debug\n")


def test_a_test_only_answer_gives_the_start_and_the_partition() -> None:
    assert parse_start("a", 0, "noise from setup\n" + SAID) == Estimate("a", datetime(2026, 11, 26, 4), "debug")
    assert parse_start("a", 0, "sbatch: Job 9 to start at 2026-11-26T04:00:01\n").partition == ""


@pytest.mark.parametrize("code, said, reason", [
    (1, "sbatch: error: Batch job submission failed: Requested node configuration is not available\n",
     "Slurm would not run it there (Batch job submission failed: Requested node configuration is not available)"),
    (1, "allocation failure: Invalid partition name specified\n",
     "Slurm would not run it there (Invalid partition name specified)"),
    (127, "", "Slurm would not run it there (exit code 127)"),
    (0, "sbatch: something else\n", "sbatch --test-only gave no start (sbatch: something else)"),
])
def test_a_refusal_or_an_answer_without_a_start_is_a_reason(code: int, said: str, reason: str) -> None:
    assert parse_start("a", code, said) == Estimate("a", skipped=reason)


@pytest.mark.parametrize("said", [
    "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)\n",
    "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\n",
])
def test_a_slurm_that_is_down_or_frozen_is_an_outage_not_a_refusal(said: str) -> None:
    """(issue 46, 5) a's slurmctld stopped or frozen read `Slurm would not run it there`, a rejected request's words."""
    skipped = parse_start("a", 1, said).skipped
    assert skipped.startswith("Slurm is not answering there (Batch job submission failed: ")
    assert skipped.endswith("; try it again later or check it: hpc-train remote check a")
    assert "would not run" not in skipped


def at(hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 11, 26, hour, minute)


def test_the_earliest_start_wins_and_a_tie_goes_to_the_first_named() -> None:
    a, b, c = Estimate("a", at(6, 30)), Estimate("b", at(4)), Estimate("c", skipped="x")
    assert choose([a, b, c]) is b
    tie = Estimate("d", at(4))
    assert choose([tie, b]) is tie and choose([b, tie]) is b
    assert choose([c, Estimate("e", skipped="silent", silent=True)]) is None


def test_one_line_says_every_clusters_estimate() -> None:
    a, b = Estimate("a", at(4)), Estimate("b", at(6, 30))
    silent, refused = Estimate("c", skipped="silent", silent=True), Estimate("d", skipped="Slurm would not run it")
    line = summary([a, b, silent, refused], a, 20)
    assert line == ("hpc-train: earliest start: a 2026-11-26T04:00 (chosen), b 2026-11-26T06:30, c did not answer "
                    "in 20 s, d skipped")
    assert skipped_line(silent, 20) == "hpc-train submit: remote c skipped: did not answer within 20 s"
    assert skipped_line(refused, 20) == "hpc-train submit: remote d skipped: Slurm would not run it"
    nothing = nothing_line([silent, refused], 20)
    assert nothing == ("no remote gave a start for this request, nothing queued: c skipped: did not answer within "
                       "20 s; d skipped: Slurm would not run it") and "\n" not in nothing


@pytest.fixture
def known(tmp_path: Path) -> dict[str, str]:
    environ = {"XDG_CONFIG_HOME": str(tmp_path)}
    config.save({name: config.Remote(name, "h", "/w") for name in ("b", "a", "c")}, environ)
    return environ


def test_remote_names_one_several_or_all(known: dict[str, str]) -> None:
    assert names("b,a", known) == ["b", "a"]
    assert names("a,a,b", known) == ["a", "b"]
    assert names("all", known) == ["a", "b", "c"]


@pytest.mark.parametrize("given, words", [
    ("a,nosuch", "unknown remote 'nosuch' (known: a, b, c)"),
    ("a,", "--remote 'a,': an empty name (known: a, b, c)"),
])
def test_an_unknown_remote_of_a_list_is_one_line(given: str, words: str, known: dict[str, str]) -> None:
    with pytest.raises(HpcTrainError) as raised:
        names(given, known)
    assert str(raised.value).startswith(words) and "\n" not in str(raised.value)


def test_all_without_remotes_says_how_to_add_one(tmp_path: Path) -> None:
    with pytest.raises(HpcTrainError, match=r"^--remote all: no remotes yet; add one: hpc-train remote add"):
        names("all", {"XDG_CONFIG_HOME": str(tmp_path)})
