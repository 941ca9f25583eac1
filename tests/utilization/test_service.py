"""The data service's processes sample themselves (utilization/service.py): a line per sample in their own file,
their CPU share of the cores they may run on; nothing where the job does not sample; samples read back in order."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from hpc_train.utilization import files
from hpc_train.utilization.service import ServiceSampler, process_name, sample_service


def test_each_sample_is_the_cpu_share_since_the_last_in_the_processes_own_file(tmp_path: Path) -> None:
    clock, cpu = iter([100.0, 110.0, 120.0]), iter([5.0, 10.0, 10.5])
    sampler = ServiceSampler(tmp_path, "worker", "node2", 16390, 10.0, lambda: next(clock), lambda: next(cpu))
    cores = len(os.sched_getaffinity(0))
    first, second = sampler.sample(), sampler.sample()
    assert first == {"t": 110.0, "name": "worker-node2-16390", "role": "worker", "host": "node2", "port": 16390,
                     "cores": cores, "cpu": round(100 * 5.0 / (10 * cores), 1)}
    assert second is not None and second["cpu"] == round(100 * 0.5 / (10 * cores), 1)
    written = (tmp_path / "utilization" / "data_service" / "worker-node2-16390.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in written] == [first, second]
    assert oct((tmp_path / "utilization" / "data_service").stat().st_mode & 0o777) == "0o700"


def test_a_busy_server_shows_its_cpu_use(tmp_path: Path) -> None:
    """The thread, on this process's own CPU time: a loop that spins shows, within the cores it may run on."""
    sampler = ServiceSampler(tmp_path, "dispatcher", "node1", 16391, 0.05).start()
    deadline = time.monotonic() + 30
    # (A whole line, not the file: the file exists a moment before its first line is written.)
    while not files.read_service_rows(tmp_path) and time.monotonic() < deadline:
        sum(range(10_000))  # busy: CPU time while we wait for the first sample
    sampler.stop()
    rows = files.read_service_rows(tmp_path)
    assert rows and rows[0]["name"] == "dispatcher-node1-16391" and 0 < rows[0]["cpu"] <= 100


def test_nothing_is_sampled_without_a_run_folder_or_with_sampling_off(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert sample_service({}, "worker", "n", 1) is None
    assert sample_service({"HPC_TRAIN_RUN_DIR": str(tmp_path), "HPC_TRAIN_SAMPLE_SECONDS": "0"}, "worker", "n", 1) is None
    assert sample_service({"HPC_TRAIN_RUN_DIR": str(tmp_path), "HPC_TRAIN_LEDGER": "0"}, "worker", "n", 1) is None
    assert sample_service({"HPC_TRAIN_RUN_DIR": str(tmp_path / "gone")}, "worker", "n", 1) is None
    assert sample_service({"HPC_TRAIN_RUN_DIR": str(tmp_path), "HPC_TRAIN_SAMPLE_SECONDS": "x"}, "worker", "n",
                          1) is None
    assert "the data service's worker is not sampled (HPC_TRAIN_SAMPLE_SECONDS='x'" in capsys.readouterr().err
    sampler = sample_service({"HPC_TRAIN_RUN_DIR": str(tmp_path), "HPC_TRAIN_SAMPLE_SECONDS": "60"}, "worker", "n", 1)
    assert sampler is not None and sampler.every == 60.0
    sampler.stop()


def test_the_samples_read_back_in_time_order_without_a_line_cut_short(tmp_path: Path) -> None:
    files.append_service_row(tmp_path, "worker-a-1", {"t": 3.0, "name": "worker-a-1", "cpu": 50.0})
    files.append_service_row(tmp_path, "dispatcher-a-2", {"t": 2.0, "name": "dispatcher-a-2", "cpu": 5.0})
    with (tmp_path / "utilization" / "data_service" / "worker-a-1.jsonl").open("a") as out:
        out.write('{"t": 4.0, "name": "worker-a-1", "cp')  # a node that died mid-write
    assert [row["t"] for row in files.read_service_rows(tmp_path)] == [2.0, 3.0]
    assert files.read_rows(tmp_path) == []  # not the nodes' samples
