"""Following a job, against FakeSlurm: scontrol and squeue answering as a job goes."""

from __future__ import annotations

from pathlib import Path

from hpc_train.slurm.follow import Accounted, follow, job_state, parse_sacct
from tests.fake_slurm import Call, FakeSlurm


def fake_slurm(folder: Path, scontrol_states: list[str], squeue_state: str = "") -> FakeSlurm:
    """scontrol answers the next state of the list on each call (then the last); squeue a fixed one."""
    def scontrol(call: Call) -> str:
        state = states.pop(0) if len(states) > 1 else states[0]
        job = call.args[-1]
        return f"JobId={job} JobName=x JobState={state} Reason=None ExitCode=0:0 StdOut=/x/slurm-{job}.out\n" \
            if state else ""

    states = list(scontrol_states)
    return FakeSlurm(folder, {"scontrol": scontrol, "squeue": f"42 {squeue_state}\n" if squeue_state else ""})


def test_state_comes_from_scontrol_even_without_accounting(tmp_path: Path) -> None:
    slurm = fake_slurm(tmp_path, ["COMPLETED"]).client()
    assert job_state("42", slurm) == ("COMPLETED", "0:0")


def test_when_scontrol_forgot_the_job_squeue_is_asked(tmp_path: Path) -> None:
    fake = fake_slurm(tmp_path, [""], squeue_state="RUNNING")
    assert job_state("42", fake.client()) == ("RUNNING", "")
    assert fake.lines() == ["scontrol show job -o 42", "squeue -h -t all -j 42 -o %i %T"]


def test_follow_shows_state_changes_and_the_chiefs_progress(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_text("0: hpc-train: epoch 1/2  loss 0.5\n1: noise from worker 1\n0: I0000 tensorflow chatter\n"
                   "0: hpc-train: epoch 2/2  loss 0.2\n0: hpc-train: half a li")
    slurm = fake_slurm(tmp_path, ["PENDING", "RUNNING", "RUNNING", "COMPLETED"]).client()
    shown: list[str] = []
    assert follow("42", log, slurm, shown.append, poll_seconds=0.01) == ("COMPLETED", "0:0")
    assert shown == ["job 42: pending", "hpc-train: epoch 1/2  loss 0.5", "hpc-train: epoch 2/2  loss 0.2",
                     "job 42: running", "job 42: completed"]


# Captured from a real sacct (Slurm 22.05.8) on `cluster up --accounting`: sacct -j ID -X -D -n -P -o
# State,ExitCode,Elapsed.
SACCT_FAILED = "FAILED|3:0|00:00:00\n"
SACCT_CANCELLED = "CANCELLED by 0|0:0|00:00:00\n"
SACCT_JUST_REQUEUED = "REQUEUED|0:0|00:00:01\n"  # just after scontrol requeue: no row yet for the next run
SACCT_REQUEUED_PENDING = "REQUEUED|0:0|00:00:01\nPENDING|0:0|00:00:00\n"
SACCT_REQUEUED_DONE = "REQUEUED|0:0|00:00:01\nCOMPLETED|0:0|00:00:00\n"


def test_sacct_rows_read_as_the_latest_run_and_the_requeues_before_it() -> None:
    assert parse_sacct(SACCT_FAILED) == Accounted("FAILED", "3:0", "00:00:00", 0)
    assert parse_sacct(SACCT_CANCELLED) == Accounted("CANCELLED", "0:0", "00:00:00", 0)
    assert parse_sacct(SACCT_JUST_REQUEUED) == Accounted("REQUEUED", "0:0", "00:00:01", 1)
    assert parse_sacct(SACCT_REQUEUED_PENDING) == Accounted("PENDING", "0:0", "00:00:00", 1)
    assert parse_sacct(SACCT_REQUEUED_DONE) == Accounted("COMPLETED", "0:0", "00:00:00", 1)
    assert parse_sacct("") is None  # sacct does not know the job


def test_an_older_job_with_the_same_id_is_not_counted_as_a_requeue() -> None:
    older = "COMPLETED|0:0|00:01:00\n"  # a job id reused, e.g. after the cluster's state was wiped
    assert parse_sacct(older + SACCT_REQUEUED_DONE).requeues == 1
    assert parse_sacct(older + SACCT_FAILED) == Accounted("FAILED", "3:0", "00:00:00", 0)


def test_once_scontrol_and_squeue_forgot_the_job_sacct_answers(tmp_path: Path) -> None:
    fake = fake_slurm(tmp_path, [""])
    fake.on("sacct", "".join(f"42|{row}\n" for row in SACCT_REQUEUED_DONE.splitlines()))  # as -o JobID,State,...
    assert job_state("42", fake.client()) == ("COMPLETED", "0:0")


def test_list_asks_squeue_once_and_sacct_once_for_the_jobs_squeue_no_longer_holds(tmp_path: Path) -> None:
    from hpc_train.slurm.follow import job_states

    # squeue holds 11 and 12 (-t all: finished ones too), sacct knows 13
    fake = FakeSlurm(tmp_path, {"squeue": "11 RUNNING\n12 COMPLETED\n", "sacct": "13|FAILED|3:0|00:00:05|node[1-2]\n",
                                "scontrol": ""})
    assert job_states(["11", "12", "13", "14"], fake.client()) == {"11": "RUNNING", "12": "COMPLETED",
                                                                    "13": "FAILED", "14": "UNKNOWN"}
    asked = fake.lines()
    assert asked == ["squeue -h -t all -j 11,12,13,14 -o %i %T",
                     "sacct -j 13,14 -X -D -n -P -o JobID,State,ExitCode,Elapsed,NodeList,Partition"]


def test_sacct_rows_of_several_jobs_are_read_job_by_job() -> None:
    from hpc_train.slurm.follow import parse_sacct_jobs

    rows = "7|REQUEUED|0:0|00:00:01|node1\n8|FAILED|3:0|00:00:00|node[3-4]\n7|COMPLETED|0:0|00:00:09|node[1-2]\n"
    assert parse_sacct_jobs(rows) == {"7": Accounted("COMPLETED", "0:0", "00:00:09", 1, "node[1-2]"),
                                      "8": Accounted("FAILED", "3:0", "00:00:00", 0, "node[3-4]")}
