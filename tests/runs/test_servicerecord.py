"""The run folder's record of the job's data service, and status's line of it (pure)."""

from __future__ import annotations

from pathlib import Path

from hpc_train.runs.servicerecord import RECORD_FILE, note_service, read_service, service_lines

RUNNING = {"state": "running", "address": "grpc://node1:26263", "workers": [26262], "restarts": 0}


def test_a_job_without_a_service_has_no_line(tmp_path: Path) -> None:
    assert read_service(tmp_path) == {} and service_lines({}, {}) == []


def test_each_process_is_running_or_not_as_slurm_lists_its_step() -> None:
    steps = {"hpc-train-data-dispatcher": "7.1", "hpc-train-data-workers": "7.3"}
    assert service_lines(RUNNING, steps) == ["  data service: dispatcher grpc://node1:26263 running (step 7.1); 1 data "
                                             "worker(s) on port(s) 26262 running (step 7.3)"]
    assert "dispatcher grpc://node1:26263 not running; 1 data worker(s) on port(s) 26262 not running" in \
        service_lines(RUNNING, {})[0]


def test_an_ended_job_says_how_its_service_ended() -> None:
    assert service_lines(RUNNING, None) == ["  data service: ended with the job"]
    assert service_lines({"state": "not started"}, {}) == [
        "  data service: did not start; the ranks read their input themselves"]


def test_notes_add_up_and_a_folder_that_cannot_be_written_is_no_error(tmp_path: Path) -> None:
    note_service(tmp_path, **RUNNING)
    note_service(tmp_path, restarts=2)
    assert read_service(tmp_path) == {**RUNNING, "restarts": 2}
    (tmp_path / "file").write_text("")
    note_service(tmp_path / "file", state="stopped")  # (not a folder: nothing written, nothing raised)
    assert not (tmp_path / "file" / RECORD_FILE).exists()


def test_auto_says_its_size_its_limit_and_why_it_stays() -> None:
    steps = {"hpc-train-data-dispatcher": "7.1", "hpc-train-data-workers": "7.3"}
    growing = {**RUNNING, "workers": [26262, 26261], "auto": {"workers": 2, "limit": 6, "before": 0.3, "settled": None}}
    assert service_lines(growing, steps)[0].endswith("running (step 7.3); auto: 2 worker(s) of at most 6")
    stays = {**growing, "auto": {**growing["auto"], "settled": "worker 2 took it down by under 3 points"}}
    assert service_lines(stays, None) == ["  data service: ended with the job; auto: 2 worker(s) of at most 6, stays "
                                          "(worker 2 took it down by under 3 points)"]
