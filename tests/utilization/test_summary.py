"""What `status` and `report` show of a job's samples, through the CLI: the line and the idle GPU while samples
come, the last summary once they stopped, nothing without GPUs; report's timeline per GPU (a PNG)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from hpc_train.utilization import files
from hpc_train.utilization.plot import PICTURE, draw, gpu_series
from tests.cli.running import run_main
from tests.cli.test_status import FORGOTTEN, demo_job, slurm


def write_samples(folder: Path, end: float, idle_gpu: str = "1") -> None:
    """40 samples 10 s apart up to `end`, node1 and node2 with two GPUs each; node2's `idle_gpu` at 1%."""
    for index in range(40):
        for node in ("node1", "node2"):
            files.append_row(folder, node, {
                "t": end - 10 * (39 - index), "node": node, "every": 10.0, "idle_below": 5.0, "idle_after": 300.0,
                "gpus": [{"gpu": gpu, "ranks": [2 * (node == "node2") + int(gpu)],
                          "util": 1.0 if (node, gpu) == ("node2", idle_gpu) else 90.0, "mem": 2**30, "mem_total": 2**34}
                         for gpu in ("0", "1")],
                "ranks": [{"rank": 0, "cores": 4, "cpu": 97.0, "rss": 2**30}]})


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in [name for name in os.environ if name.startswith("SLURM")]:
        monkeypatch.delenv(name)
    slurm(tmp_path, monkeypatch, FORGOTTEN)
    return demo_job(tmp_path)


def test_status_sums_the_gpus_up_and_names_the_idle_one_with_its_rank(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_samples(work, time.time())
    code, out, err = run_main(["status", "1"], capsys)
    assert code == 0, err
    assert out.splitlines()[-2:] == ["GPUs: 3 of 4 busy over 50%; node2 GPU 1 idle for 6 min",
                                     out.splitlines()[-1]]
    assert out.splitlines()[-1].startswith("  idle: node2 GPU 1 (rank 3) idle for 6 min: under 5% since ")


def test_once_the_samples_stopped_status_says_the_last_summary_and_names_no_idle_gpu(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_samples(work, time.time() - 3600)
    code, out, err = run_main(["status", "1"], capsys)
    assert code == 0, err
    assert out.splitlines()[-1].startswith("GPUs: 3 of 4 busy over 50% (last sampled ") and "idle for" not in out and "  idle:" not in out


def test_a_job_without_samples_or_without_gpus_shows_no_gpu_line(work: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["status", "1"], capsys)
    assert code == 0 and "GPUs" not in out
    files.append_row(work, "node1", {"t": time.time(), "node": "node1", "gpus": [], "ranks": []})
    code, out, _ = run_main(["status", "1"], capsys)
    assert code == 0 and "GPUs" not in out
    code, out, _ = run_main(["report", "1"], capsys)
    assert code == 0 and "utilization" not in out and not (work / PICTURE).exists()


def test_report_draws_a_timeline_per_gpu(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_samples(work, time.time())
    code, out, err = run_main(["report", "1"], capsys)
    assert code == 0, err
    assert f"wrote runs/mnist-2node-1/{PICTURE} (utilization per GPU)" in out.splitlines()
    assert (work / PICTURE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_draws_the_data_services_cpu_use_and_names_the_picture(work: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from hpc_train.utilization.serviceplot import PICTURE as SERVICE_PICTURE

    code, out, _ = run_main(["report", "1"], capsys)
    assert code == 0 and "data service" not in out and not (work / SERVICE_PICTURE).exists()
    for index in range(3):
        for name, cpu in (("dispatcher-node1-16391", 2.0), ("worker-node1-16390", 90.0)):
            files.append_service_row(work, name, {"t": time.time() + index, "name": name, "role": name.split("-")[0],
                                                  "host": "node1", "port": int(name[-5:]), "cores": 1, "cpu": cpu})
    code, out, err = run_main(["report", "1"], capsys)
    assert code == 0, err
    assert f"wrote runs/mnist-2node-1/{SERVICE_PICTURE} (the data service's CPU use, per process)" in out.splitlines()
    assert (work / SERVICE_PICTURE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_timeline_has_a_series_per_gpu_with_its_memory_share(tmp_path: Path) -> None:
    write_samples(tmp_path, 1000.0)
    series = gpu_series(files.read_rows(tmp_path))
    assert sorted(series) == [("node1", "0"), ("node1", "1"), ("node2", "0"), ("node2", "1")]
    assert series[("node2", "1")][0] == (610.0, 1.0, 100 / 16, (3,))
    assert not draw([], tmp_path / PICTURE)
