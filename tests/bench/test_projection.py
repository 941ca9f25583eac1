from __future__ import annotations

import math
from pathlib import Path

import pytest

from hpc_train.bench import projection
from hpc_train.bench.projection import (DEFAULT_GRADIENT_BYTES, INTERCONNECTS, WORKER_COUNTS, Check, ComputeModel, Link,
                                        allreduce_seconds, efficiency, first_workers_below, fit_compute, fit_link,
                                        render, step_seconds)

# A CPU core on the default CNN: 2 ms per step plus 0.4 ms per image.
CPU = ComputeModel(fixed=0.002, per_image=0.0004)
TEN_GBE = next(link for link in INTERCONNECTS if link.name == "10 GbE")
INSTANT = Link("instant", bandwidth=math.inf, latency=0.0)
HOPELESS = Link("carrier pigeon", bandwidth=1.0, latency=1.0)


def test_the_default_cnn_has_1388584_gradient_bytes() -> None:
    assert DEFAULT_GRADIENT_BYTES == 1_388_584


def test_interconnect_bandwidth_is_80_percent_of_line_rate_in_bytes() -> None:
    assert TEN_GBE.bandwidth == pytest.approx(1e9)
    assert TEN_GBE.latency == pytest.approx(25e-6)


def test_ring_allreduce_matches_a_hand_computation() -> None:
    link = Link("test", bandwidth=1e9, latency=1e-5)
    # 2(p-1) = 6 latency steps; 2(p-1)/p = 1.5 times the gradient over the link.
    assert allreduce_seconds(1e6, 4, link) == pytest.approx(6e-5 + 1.5e-3)


def test_one_worker_communicates_nothing() -> None:
    assert allreduce_seconds(DEFAULT_GRADIENT_BYTES, 1, HOPELESS) == 0.0
    assert step_seconds(CPU, 64, DEFAULT_GRADIENT_BYTES, 1, HOPELESS) == pytest.approx(CPU.seconds(64))
    assert efficiency(CPU, 64, DEFAULT_GRADIENT_BYTES, 1, HOPELESS) == pytest.approx(1.0)


def test_step_seconds_applies_speedup_and_overlap() -> None:
    communication = allreduce_seconds(DEFAULT_GRADIENT_BYTES, 8, TEN_GBE)
    assert step_seconds(CPU, 64, DEFAULT_GRADIENT_BYTES, 8, TEN_GBE, speedup=4.0, overlap=0.25) == pytest.approx(
        CPU.seconds(64) / 4 + 0.75 * communication)


def test_fit_compute_recovers_a_line_exactly() -> None:
    model = fit_compute([32, 64, 256], [0.003 + 0.0005 * batch for batch in (32, 64, 256)])
    assert model.fixed == pytest.approx(0.003)
    assert model.per_image == pytest.approx(0.0005)


def test_fit_compute_clamps_a_negative_fixed_cost_to_zero() -> None:
    model = fit_compute([10, 20], [0.001, 0.003])  # the unconstrained line crosses zero at batch 5
    assert model.fixed == 0.0
    assert model.per_image > 0


def test_fit_compute_needs_two_distinct_batches() -> None:
    with pytest.raises(ValueError):
        fit_compute([64, 64, 64], [0.02, 0.021, 0.019])


def test_fit_link_recovers_latency_and_bandwidth() -> None:
    truth = Link("loopback", bandwidth=3e9, latency=40e-6)
    sizes = [1e4, 1e5, 1e6, 1e7]
    for workers in (2, 4):
        fitted = fit_link("loopback", sizes, [allreduce_seconds(size, workers, truth) for size in sizes], workers)
        assert fitted.name == "loopback"
        assert fitted.bandwidth == pytest.approx(truth.bandwidth)
        assert fitted.latency == pytest.approx(truth.latency)


def test_fit_link_refuses_time_that_does_not_grow_with_size() -> None:
    with pytest.raises(ValueError):
        fit_link("odd", [1e5, 1e6], [0.002, 0.001])


def test_efficiency_falls_with_workers() -> None:
    values = [efficiency(CPU, 64, DEFAULT_GRADIENT_BYTES, count, TEN_GBE) for count in WORKER_COUNTS]
    assert all(later < earlier for earlier, later in zip(values, values[1:]))
    assert values[0] < 1.0


def test_efficiency_rises_with_batch() -> None:
    values = [efficiency(CPU, batch, DEFAULT_GRADIENT_BYTES, 64, TEN_GBE) for batch in (16, 64, 256, 1024)]
    assert all(later > earlier for earlier, later in zip(values, values[1:]))


def test_first_workers_below_extremes() -> None:
    assert first_workers_below(0.9, CPU, 64, DEFAULT_GRADIENT_BYTES, INSTANT) is None
    assert first_workers_below(0.9, CPU, 64, DEFAULT_GRADIENT_BYTES, HOPELESS) == 2


def test_first_workers_below_is_the_smallest_count_below() -> None:
    count = first_workers_below(0.9, CPU, 64, DEFAULT_GRADIENT_BYTES, TEN_GBE)
    assert count is not None and count > 2
    assert efficiency(CPU, 64, DEFAULT_GRADIENT_BYTES, count, TEN_GBE) < 0.9
    assert efficiency(CPU, 64, DEFAULT_GRADIENT_BYTES, count // 2, TEN_GBE) >= 0.9


def test_larger_batches_push_the_90_percent_point_out_on_10_gbe() -> None:
    points = [first_workers_below(0.9, CPU, batch, DEFAULT_GRADIENT_BYTES, TEN_GBE) for batch in (32, 64, 256, 1024)]
    reach = [math.inf if point is None else point for point in points]
    assert reach == sorted(reach)
    assert reach[0] < reach[-1]


def test_check_error_is_relative() -> None:
    assert Check(workers=2, batch=64, measured=0.020, predicted=0.022).error == pytest.approx(0.1)
    assert Check(workers=1, batch=64, measured=0.020, predicted=0.015).error == pytest.approx(-0.25)


def _render(compute: ComputeModel = CPU, speedups: tuple[float, ...] = (1.0, 50.0), batches=(32, 64, 1024)) -> str:
    local = Link("loopback", bandwidth=2e9, latency=30e-6)
    checks = [Check(1, 64, 0.028, 0.0276), Check(2, 64, 0.031, 0.0284)]
    return render(compute, DEFAULT_GRADIENT_BYTES, local, checks, batches, speedups)


def test_render_lays_out_fits_checks_and_tables() -> None:
    text = _render()
    assert text.startswith("### Projection past one machine")
    assert "2.00 ms + 0.400 ms/image" in text
    assert "α = 30.0 µs, 2.00 GB/s" in text
    assert "| 2 | 64 | 31.0 | 28.4 | -8.4% |" in text
    assert "| interconnect | batch 32 | batch 64 | batch 1024 |" in text
    assert "| interconnect | 8 workers | 64 workers | 512 workers |" in text
    assert text.count("#### Compute on") == 2
    for link in INTERCONNECTS:
        assert text.count(f"| {link.name} |") == 4  # two tables for each of two speedups
    # On the CPU core, fast InfiniBand holds 90% past 512 workers at the largest batch.
    assert "> 512" in text


def test_render_says_past_512_only_where_no_count_falls_below() -> None:
    slow = _render(ComputeModel(fixed=10.0, per_image=0.0), speedups=(1.0,))  # 10 s steps: communication is noise
    assert slow.count("> 512") == len(INTERCONNECTS) * 3
    hopeless = _render(ComputeModel(fixed=1e-6, per_image=0.0), speedups=(1.0,))
    assert "> 512" not in hopeless


def test_plot_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "projection.png"
    projection.plot(path, CPU, DEFAULT_GRADIENT_BYTES, (64, 1024), speedup=50.0)
    assert path.read_bytes().startswith(b"\x89PNG")
    assert path.stat().st_size > 1000


def test_plot_without_matplotlib_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(projection, "pyplot", lambda: None)
    path = tmp_path / "projection.png"
    projection.plot(path, CPU, DEFAULT_GRADIENT_BYTES, (64, 1024))
    assert not path.exists()
