"""`--data-workers auto`'s decision (data_service/autosize.py), epoch by epoch from tables of input shares: when a
worker is added, when the size stays and why, the lines that say so, the job's limit, and the sizing a next
attempt starts from."""

from __future__ import annotations

import pytest

from hpc_train.data_service.autosize import Sizing, decide, job_cpus, last_epoch, worker_limit


def run(shares: list[float], limit: int = 8, start: Sizing | None = None) -> tuple[Sizing, list[str | None]]:
    """The sizing after each share in turn, and each epoch's line (None: nothing said)."""
    sizing, lines = start or Sizing(1, limit), []
    for share in shares:
        decision = decide(sizing, share)
        sizing = decision.sizing
        lines.append(decision.line)
    return sizing, lines


NOT_HELPED = "worker 2 took it down by under 3 points"
AT_3 = "3 is this job's most (its CPUs beside the ranks, at most 8)"


@pytest.mark.parametrize("shares, limit, workers, before, settled", [
    ([0.05, 0.08, 0.02], 8, 1, None, None),  # fed well: no worker added, nothing to settle
    ([0.34], 8, 2, 0.34, None),  # over 10%: one more, its measure pending
    ([0.34, 0.12], 8, 3, 0.12, None),  # still over 10%, and 22 points down: a third
    ([0.34, 0.20, 0.08], 8, 3, None, None),  # each helped, then under 10%: stays, and may grow again later
    ([0.34, 0.33], 8, 2, None, NOT_HELPED),  # the second did not help: settled at 2
    ([0.34, 0.32, 0.05, 0.60], 8, 2, None, NOT_HELPED),  # settled: later shares change nothing
    ([0.50, 0.40, 0.30, 0.20], 3, 3, None, AT_3),  # the job's limit
    ([0.09, 0.30], 8, 2, 0.30, None),  # under 10% first, then over: added once the share rose
    ([0.20, 0.08, 0.25], 8, 3, 0.25, None),  # a share that rose again after the size stayed: grows again
])
def test_workers_are_added_while_the_share_is_over_10_percent_and_the_last_one_helped(
        shares: list[float], limit: int, workers: int, before: float | None, settled: str | None) -> None:
    assert run(shares, limit)[0] == Sizing(workers, limit, before, settled)


def test_each_change_is_one_line_with_the_share_before_and_after() -> None:
    _, lines = run([0.34, 0.20, 0.08, 0.07])
    assert lines == [
        "data workers 1 -> 2: input 34% of the last epoch",
        "data workers 2 -> 3: input 20% of the last epoch (34% before worker 2)",
        "data workers stay at 3: input 8% of the last epoch (20% before worker 3): under 10%",
        None,  # nothing changed, nothing waited for its measure: silent
    ]


def test_a_worker_that_did_not_help_settles_the_size_in_one_line_and_nothing_after() -> None:
    sizing, lines = run([0.40, 0.39, 0.60, 0.05])
    assert lines[1] == ("data workers stay at 2: input 39% of the last epoch (40% before worker 2): worker 2 took it "
                        "down by under 3 points")
    assert lines[2:] == [None, None] and sizing.workers == 2


def test_a_fall_of_exactly_the_meaningful_amount_helped_and_one_just_under_did_not() -> None:
    assert decide(Sizing(2, 8, before=0.30), 0.27).sizing.workers == 3
    assert decide(Sizing(2, 8, before=0.30), 0.2701).sizing.settled is not None


def test_at_the_limit_the_size_stays_and_says_why() -> None:
    decision = decide(Sizing(1, 1), 0.5)
    assert decision.sizing == Sizing(1, 1, None, "1 is this job's most (its CPUs beside the ranks, at most 8)")
    assert decision.line == ("data workers stay at 1: input 50% of the last epoch: 1 is this job's most (its CPUs "
                             "beside the ranks, at most 8)")


def test_a_next_attempt_starts_at_the_size_reached_within_its_own_limit() -> None:
    reached, _ = run([0.34, 0.20, 0.19])
    again = Sizing.of_record(reached.record(), limit=8)
    assert again == reached and again.workers == 3 and again.settled is not None
    assert decide(again, 0.5).line is None  # settled: it stays
    assert Sizing.of_record(reached.record(), limit=2).workers == 2  # fewer CPUs this time
    assert Sizing.of_record(None, 4) == Sizing(1, 4)
    assert Sizing.of_record({"workers": "3", "before": "x", "settled": 5}, 4) == Sizing(1, 4)


def test_a_worker_that_leaves_the_share_near_100_percent_but_makes_the_steps_faster_helped() -> None:
    # benchmarks/data_service_auto.py: a rank that waits on its input nearly always keeps a share of 99% while its
    # epochs went from 1,600 to 2,500 images/s (seconds: a step's average in the epoch).
    sizing = decide(Sizing(1, 3), 0.99, seconds=30.0).sizing
    assert (sizing.workers, sizing.before, sizing.before_seconds) == (2, 0.99, 30.0)
    decision = decide(sizing, 0.99, seconds=19.5)
    assert decision.sizing.workers == 3 and decision.sizing.before_seconds == 19.5
    assert decision.line == ("data workers 2 -> 3: input 99% of the last epoch (99% before worker 2), a step 35% "
                             "faster")
    settled = decide(decision.sizing, 0.99, seconds=18.6)  # 5% faster: not enough
    assert settled.sizing.settled == "worker 3 took it down by under 3 points nor a step's time by 10%"
    assert settled.line == ("data workers stay at 3: input 99% of the last epoch (99% before worker 3): worker 3 took "
                            "it down by under 3 points nor a step's time by 10%")
    assert decide(Sizing(2, 8, before=0.5, before_seconds=10.0), 0.5, seconds=9.0).sizing.workers == 3  # 10%: helped
    assert decide(Sizing(2, 8, before=0.5), 0.5, seconds=5.0).sizing.settled is not None  # unmeasured before: share
    again = Sizing.of_record(decision.sizing.record(), limit=3)
    assert again == decision.sizing  # a next attempt measures against the seconds kept


@pytest.mark.parametrize("text, cpus", [("4(x2),2", 10), ("8", 8), ("3(x4)", 12), ("", None), ("4(x2", None)])
def test_the_jobs_cpus_as_slurm_lists_them(text: str, cpus: int | None) -> None:
    assert job_cpus(text) == cpus


@pytest.mark.parametrize("env, tasks, cpus, limit", [
    ({"SLURM_JOB_CPUS_PER_NODE": "4(x2)"}, 2, 1, 6),  # 8 CPUs, 2 ranks of 1: 6 one-CPU workers
    ({"SLURM_JOB_CPUS_PER_NODE": "4(x2)", "SLURM_CPUS_PER_TASK": "3"}, 2, 1, 2),
    ({"SLURM_JOB_CPUS_PER_NODE": "4(x2)"}, 2, 4, 1),
    ({"SLURM_JOB_CPUS_PER_NODE": "64(x4)"}, 8, 2, 8),  # plenty: the cap (the window's ports)
    ({"SLURM_JOB_CPUS_PER_NODE": "2"}, 2, 1, 1),  # none free: the one it starts with
    ({}, 2, 1, 8),  # Slurm says nothing: the cap
])
def test_the_limit_is_the_cpus_beside_the_ranks_within_the_cap(env: dict[str, str], tasks: int, cpus: int,
                                                                 limit: int) -> None:
    assert worker_limit(env, tasks, cpus) == limit


def test_the_epoch_decided_on_is_the_newest_that_began_with_the_workers_running() -> None:
    record = {"epochs": [{"epoch": 1, "input_share": 0.4, "began": 100.0, "ended": 110.0},
                         {"epoch": 2, "input_share": 0.3, "began": 110.0, "ended": 120.0},
                         {"epoch": 3, "input_share": "x", "began": 120.0, "ended": 130.0}]}
    assert last_epoch(record, since=0.0) == (120.0, 0.3, None)  # (an older record: no steps' seconds)
    assert last_epoch(record, since=105.0) == (120.0, 0.3, None)
    record["epochs"][1]["steps_seconds"] = 8.5
    assert last_epoch(record, since=0.0) == (120.0, 0.3, None)  # seconds without their steps: not a measure
    record["epochs"][1]["steps"] = 17
    assert last_epoch(record, since=0.0) == (120.0, 0.3, 0.5)  # a step's average: an attempt's first epoch is short
    assert last_epoch(record, since=115.0) is None  # epoch 2 began before the worker listened: half of one
    assert last_epoch(record, since=0.0, seen=120.0) is None  # decided on already
    assert last_epoch({}, 0.0) is None and last_epoch({"epochs": "x"}, 0.0) is None
