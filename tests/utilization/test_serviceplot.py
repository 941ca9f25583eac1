"""report's picture of the data service (utilization/serviceplot.py): a series per process, the dispatcher first,
each named by its role, host, port and cores; a PNG, and nothing drawn without a sample."""

from __future__ import annotations

from pathlib import Path

from hpc_train.utilization.serviceplot import PICTURE, cpu_series, draw, label

ROWS = [{"t": 10.0 * index, "name": f"{role}-node{node}-{port}", "role": role, "host": f"node{node}", "port": port,
         "cores": cores, "cpu": cpu + index}
        for index in range(5)
        for role, node, port, cores, cpu in (("worker", 2, 16389, 2, 80.0), ("worker", 1, 16390, 1, 60.0),
                                             ("dispatcher", 1, 16391, 4, 1.0))]


def test_a_series_per_process_the_dispatcher_first() -> None:
    series = cpu_series(list(reversed(ROWS)))
    assert list(series) == ["dispatcher node1:16391 (4 cores)", "worker node1:16390 (1 core)",
                            "worker node2:16389 (2 cores)"]
    assert series["worker node1:16390 (1 core)"] == [(10.0 * index, 60.0 + index) for index in range(5)]
    assert label({"role": "worker", "host": "n", "port": 1}) == "worker n:1"


def test_report_draws_the_picture_and_nothing_without_samples(tmp_path: Path) -> None:
    assert draw(ROWS, tmp_path / PICTURE)
    assert (tmp_path / PICTURE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not draw([], tmp_path / "none.png") and not (tmp_path / "none.png").exists()
