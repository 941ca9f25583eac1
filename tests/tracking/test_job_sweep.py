"""The sweep's parent run is found from the element's folder whatever the cwd (the job runs in the snapshot)."""

from __future__ import annotations

import json
from pathlib import Path

from hpc_train.runs.state import write_tracking
from hpc_train.tracking.job import close_parent_when_done


class FakeMlflow:
    def __init__(self) -> None:
        self.ended: list[tuple[str, str]] = []

    def set_terminated(self, run_id: str, status: str) -> None:
        self.ended.append((run_id, status))


def test_parent_closed_from_another_cwd(tmp_path: Path, monkeypatch) -> None:
    submit, elsewhere = tmp_path / "submit", tmp_path / "snapshot"
    runs = submit / "runs"
    sweep = runs / "a-7"
    sweep.mkdir(parents=True)
    elsewhere.mkdir()
    (sweep / "job.json").write_text(json.dumps({"elements": [{}, {}]}))
    write_tracking(sweep, run_id="parent")
    for index in range(2):
        (runs / f"a-7_{index}").mkdir()
        write_tracking(runs / f"a-7_{index}", closed=True)
    record = {"sweep": "7", "job_id": "7_1", "name": "a", "folder": "runs/a-7_1"}
    monkeypatch.chdir(elsewhere)
    mlflow = FakeMlflow()
    close_parent_when_done(mlflow, record, runs / "a-7_1")
    assert mlflow.ended == [("parent", "FINISHED")]
    assert not (elsewhere / "runs").exists()
