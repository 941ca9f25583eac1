"""`hpc-train track sync` of a job whose body could not say how it ended (tracking/sync.py): Slurm says it, through
a fake Slurm client, to an MLflow client in memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpc_train.errors import HpcTrainError
from hpc_train.runs.folders import JobRecord
from hpc_train.runs.metrics import write_metrics
from hpc_train.runs.state import read_tracking, write_tracking
from hpc_train.tracking.job import JobTracking
from hpc_train.tracking.settings import status_from_slurm
from hpc_train.tracking.sync import sync
from tests.tracking.fake_mlflow import FakeMlflow, fake_mlflow  # noqa: F401 - the fixture
from tests.tracking.server import MlflowServer, mlflow_server  # noqa: F401 - the fixture


class AskedSlurm:
    """The part of SlurmClient that follow.job_state asks: the controller's word, else accounting's."""

    def __init__(self, shown: dict[str, str], accounted: str | None) -> None:
        self.shown, self.accounted = shown, accounted

    def show_job(self, job_id: str, timeout: float = 30) -> dict[str, str]:
        return self.shown

    def queued_states(self, job_ids: list[str]) -> dict[str, str]:
        return {}

    def accounting(self, job_ids: list[str]) -> str | None:
        return self.accounted


def a_job(tmp_path: Path, job_id: str = "12") -> JobRecord:
    folder = tmp_path / "runs" / f"job-{job_id}"
    folder.mkdir(parents=True)
    (folder / "job.json").write_text(json.dumps({"job_id": job_id, "name": "job", "folder": str(folder),
                                                 "nodes": 2}))
    return JobRecord(job_id, "job", str(folder), 1, 1, "mirrored", 0.0)


def test_slurms_states_end_a_run_killed_failed_or_finished_and_the_rest_leave_it_running() -> None:
    ends = {"CANCELLED by 1000": "KILLED", "TIMEOUT": "KILLED", "PREEMPTED": "KILLED", "NODE_FAIL": "KILLED",
            "FAILED": "FAILED", "OUT_OF_MEMORY": "FAILED", "COMPLETED": "FINISHED"}
    assert {state: status_from_slurm(state) for state in ends} == ends
    assert [status_from_slurm(state) for state in ("PENDING", "RUNNING", "REQUEUED", "COMPLETING", "UNKNOWN", "")] \
        == [None] * 6


@pytest.mark.parametrize(("shown", "accounted", "said"), [
    ({"JobState": "CANCELLED"}, None, "KILLED"),  # the controller still holds it
    ({}, "12|REQUEUED|0:0|00:01:00|n1\n12|TIMEOUT|0:0|00:02:00|n1\n", "KILLED"),  # only accounting, its last run
    ({}, "12|OUT_OF_MEMORY|0:125|00:01:00|n1\n", "FAILED"),
    ({}, "12|COMPLETED|0:0|00:01:00|n1\n", "FINISHED"),
    ({"JobState": "RUNNING"}, None, "still running"),
    ({}, None, "still running"),  # no answer from Slurm: as before, until the folder says
])
def test_sync_ends_a_run_as_slurm_says_its_job_ended_when_the_folder_does_not_say(
        fake_mlflow: FakeMlflow, tmp_path: Path, shown: dict[str, str], accounted: str | None, said: str) -> None:
    [line] = sync(a_job(tmp_path), "sqlite:////x/mlflow.db", None, {}, AskedSlurm(shown, accounted))
    assert f" 0 epoch(s) logged, {said}; see it: " in line
    assert fake_mlflow.runs["run1"].status == ("RUNNING" if said == "still running" else said)


def test_a_job_run_here_is_never_asked_of_slurm(fake_mlflow: FakeMlflow, tmp_path: Path) -> None:
    [line] = sync(a_job(tmp_path, "local1"), "sqlite:////x/mlflow.db", None, {},
                  AskedSlurm({"JobState": "CANCELLED"}, None))  # another job with that id, were Slurm asked
    assert ", still running; see it: " in line


def test_a_second_sync_keeps_the_end_the_job_said(fake_mlflow: FakeMlflow, tmp_path: Path) -> None:
    record = a_job(tmp_path)
    write_tracking(Path(record.folder), verdict="FINISHED")
    for _ in range(2):  # the run found again is not taken for an attempt that goes on
        [line] = sync(record, "sqlite:////x/mlflow.db", None, {}, AskedSlurm({}, None))
        assert ", FINISHED; see it: " in line and fake_mlflow.runs["run1"].status == "FINISHED"


class BrokenSlurm(AskedSlurm):
    def show_job(self, job_id: str, timeout: float = 30) -> dict[str, str]:
        raise ValueError("scontrol: unreadable answer")


def test_slurm_failing_is_said_in_slurms_name_not_mlflows(fake_mlflow: FakeMlflow, tmp_path: Path) -> None:
    with pytest.raises(HpcTrainError) as raised:
        sync(a_job(tmp_path), "sqlite:////x/mlflow.db", None, {}, BrokenSlurm({}, None))
    assert str(raised.value) == ("Slurm, asked how job 12 ended: scontrol: unreadable answer; check that "
                                 "`scontrol show job 12` answers, then run it again")


def closed_by_its_job(record: JobRecord, uri: str, experiment: str | None = None) -> None:
    """The job body's tracking of a 2-node job on pnode[1-2]: one epoch logged, the run closed FINISHED there."""
    folder = Path(record.folder)
    write_metrics(folder, {"epochs": [{"epoch": 1, "loss": 0.5}]})
    tracking = JobTracking.for_job(folder, uri, experiment, {"SLURM_JOB_ID": record.job_id,
                                                             "SLURM_JOB_NODELIST": "pnode[1-2]"}, print)
    tracking.start()
    tracking.finish(0, 0)


def test_sync_of_a_closed_run_keeps_its_tags_and_status_and_adds_only_what_it_lacks(
        fake_mlflow: FakeMlflow, tmp_path: Path) -> None:
    record = a_job(tmp_path)
    closed_by_its_job(record, "sqlite:////x/mlflow.db")
    run = fake_mlflow.runs["run1"]
    assert (run.status, run.tags["hpc_train.nodes"]) == ("FINISHED", "pnode[1-2]")
    run.tags.pop("hpc_train.job_id")  # a tag it lacks (an older hpc-train's run)
    write_metrics(Path(record.folder), {"epochs": [{"epoch": 1, "loss": 0.5}, {"epoch": 2, "loss": 0.25}]})
    [line] = sync(record, "sqlite:////x/mlflow.db", None, {}, AskedSlurm({"JobState": "CANCELLED"}, None))
    assert ", 2 epoch(s) logged, FINISHED; see it: " in line  # its own end, not what Slurm says of job 12 now
    assert (run.status, run.tags["hpc_train.nodes"]) == ("FINISHED", "pnode[1-2]")
    assert run.tags["hpc_train.job_id"] == "12" and run.metrics["loss"] == [(1, 0.5), (2, 0.25)]
    assert [call for call in fake_mlflow.calls if call.startswith("set_terminated")] == ["set_terminated run1 FINISHED"]
    assert len(run.artifacts) == 1  # metrics.json, once


@pytest.mark.mlflow
def test_sync_keeps_a_closed_runs_nodes_tag_and_end_time_on_a_real_server(mlflow_server: MlflowServer,
                                                                         tmp_path: Path) -> None:
    import uuid

    record, experiment = a_job(tmp_path), f"closed-{uuid.uuid4().hex[:8]}"
    closed_by_its_job(record, mlflow_server.uri, experiment)
    [before] = mlflow_server.runs(experiment)
    assert (before.info.status, before.data.tags["hpc_train.nodes"]) == ("FINISHED", "pnode[1-2]")
    write_metrics(Path(record.folder), {"epochs": [{"epoch": 1, "loss": 0.5}, {"epoch": 2, "loss": 0.25}]})
    for _ in range(2):
        [line] = sync(record, mlflow_server.uri, None, {}, AskedSlurm({}, None))
        assert ", 2 epoch(s) logged, FINISHED; see it: " in line
        [after] = mlflow_server.runs(experiment)
        assert (after.info.status, after.info.end_time) == ("FINISHED", before.info.end_time)
        assert after.data.tags["hpc_train.nodes"] == "pnode[1-2]"  # not the record's "2" (issue 36, 2)
        assert mlflow_server.steps(after.info.run_id, "loss") == [1, 2]
    assert read_tracking(Path(record.folder))["status"] == "FINISHED"
