"""Projecting data-parallel step time past one machine with a ring all-reduce cost model.

One machine can only measure one or two workers; this module says what the
measurements imply for many machines. The model:

    step(p) = compute(b) / speedup + (1 - overlap) * allreduce(n, p)
    compute(b) = fixed + per_image * b                     (fitted to measured 1-worker steps)
    allreduce(n, p) = 2(p-1) * alpha + 2(p-1)/p * n / bandwidth   (ring; 0 for p = 1)
    efficiency(p) = step(1) / step(p)                      (weak scaling)

with p workers, b images per worker per step, n gradient bytes (the default CNN:
347,146 float32 parameters, 1,388,584 bytes), alpha the latency of one message
step and bandwidth the bytes/s a link achieves. Assumptions:

- Synchronous data parallelism at weak scaling: the per-worker batch is fixed,
  so the global batch grows with p; every step all-reduces every gradient once.
- The ring algorithm (NCCL's and Horovod's default for large tensors): bandwidth-optimal,
  but its latency term grows with p; tree or hierarchical all-reduces do better
  there, so for small gradients on many workers the model is pessimistic.
- One worker per machine, full-duplex links, a non-blocking switch: no contention,
  no stragglers, no gradient compression, no tensor-fusion overheads.
- An accelerator computes `speedup` times faster than the measured CPU core and
  nothing else changes (the input pipeline keeps up).
- No communication hides behind backprop unless `overlap` says so (default 0: conservative).
- Network bandwidth is LINK_EFFICIENCY of line rate; latencies are typical figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hpc_train.bench.report import pyplot, table

LINK_EFFICIENCY = 0.8  # bulk transfers rarely beat ~80% of line rate once protocol headers are paid
DEFAULT_GRADIENT_BYTES = 347_146 * 4  # the default CNN's float32 parameters
WORKER_COUNTS = (2, 4, 8, 16, 32, 64, 128, 256, 512)
EFFICIENCY_AT = (8, 64, 512)


@dataclass(frozen=True)
class Link:
    name: str  # e.g. "10 GbE"
    bandwidth: float  # bytes/s actually achieved (line rate x efficiency)
    latency: float  # seconds per message step (alpha)


def _network(name: str, bits_per_second: float, latency: float) -> Link:
    return Link(name, bits_per_second / 8 * LINK_EFFICIENCY, latency)


# The latencies are typical MPI/NCCL small-message figures for each fabric, an assumption, not a measurement.
INTERCONNECTS: tuple[Link, ...] = (
    _network("1 GbE", 1e9, 50e-6),
    _network("10 GbE", 10e9, 25e-6),
    _network("25 GbE", 25e9, 10e-6),
    _network("InfiniBand EDR 100 Gb/s", 100e9, 2e-6),
    _network("InfiniBand HDR 200 Gb/s", 200e9, 1.5e-6),
)


@dataclass(frozen=True)
class ComputeModel:
    """Seconds of computation per training step for a per-worker batch: fixed + per_image * batch."""

    fixed: float
    per_image: float

    def seconds(self, batch: int) -> float:
        return self.fixed + self.per_image * batch


def _line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope) with intercept >= 0; needs >= 2 distinct xs."""
    if len(xs) != len(ys) or len(set(xs)) < 2:
        raise ValueError(f"a line needs points at >= 2 distinct x values, got x = {list(xs)}, y = {list(ys)}")
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = (sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys))
             / sum((x - mean_x) ** 2 for x in xs))
    intercept = mean_y - slope * mean_x
    if intercept >= 0:
        return intercept, slope
    # A negative fixed cost is noise, not physics: the best line through the origin is the constrained optimum.
    return 0.0, sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)


def fit_compute(batches: Sequence[int], step_seconds: Sequence[float]) -> ComputeModel:
    """The compute model through measured single-worker step times (ValueError with < 2 distinct batches)."""
    fixed, per_image = _line([float(b) for b in batches], step_seconds)
    return ComputeModel(fixed, per_image)


def fit_link(name: str, sizes: Sequence[float], seconds: Sequence[float], workers: int = 2) -> Link:
    """alpha and bandwidth of the ring model fitted to all-reduce times of `sizes` bytes among `workers`."""
    if workers < 2:
        raise ValueError(f"an all-reduce needs >= 2 workers to time, got {workers}")
    intercept, slope = _line(sizes, seconds)
    if slope <= 0:
        raise ValueError(f"all-reduce time does not grow with size ({list(sizes)} B -> {list(seconds)} s): "
                         "no bandwidth to fit")
    steps = 2 * (workers - 1)
    return Link(name, bandwidth=steps / workers / slope, latency=intercept / steps)


def allreduce_seconds(gradient_bytes: float, workers: int, link: Link) -> float:
    """Ring all-reduce: 2(p-1) message steps, each moving n/p bytes; free for one worker."""
    if workers <= 1:
        return 0.0
    steps = 2 * (workers - 1)
    return steps * link.latency + steps / workers * gradient_bytes / link.bandwidth


def step_seconds(compute: ComputeModel, batch: int, gradient_bytes: float, workers: int, link: Link,
                 speedup: float = 1.0, overlap: float = 0.0) -> float:
    """One synchronous step: computation on the accelerator plus the communication not hidden behind it."""
    return compute.seconds(batch) / speedup + (1 - overlap) * allreduce_seconds(gradient_bytes, workers, link)


def efficiency(compute: ComputeModel, batch: int, gradient_bytes: float, workers: int, link: Link,
               speedup: float = 1.0, overlap: float = 0.0) -> float:
    """Weak-scaling efficiency: single-worker step time / p-worker step time."""
    single = step_seconds(compute, batch, gradient_bytes, 1, link, speedup, overlap)
    return single / step_seconds(compute, batch, gradient_bytes, workers, link, speedup, overlap)


def first_workers_below(threshold: float, compute: ComputeModel, batch: int, gradient_bytes: float, link: Link,
                        speedup: float = 1.0, overlap: float = 0.0,
                        workers: Sequence[int] = WORKER_COUNTS) -> int | None:
    """The smallest worker count whose efficiency falls below `threshold`, or None."""
    return next((count for count in sorted(workers)
                 if efficiency(compute, batch, gradient_bytes, count, link, speedup, overlap) < threshold), None)


@dataclass(frozen=True)
class Check:
    """The model against one measured step time."""

    workers: int
    batch: int
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1


def _speedup_name(speedup: float) -> str:
    return "the measured CPU core" if speedup == 1 else f"an accelerator {speedup:g}x the measured core"


def _speedup_tables(compute: ComputeModel, gradient_bytes: float, batches: Sequence[int], speedup: float,
                    threshold: float, default_batch: int) -> list[str]:
    def first_below(link: Link, batch: int) -> str:
        count = first_workers_below(threshold, compute, batch, gradient_bytes, link, speedup)
        return f"> {max(WORKER_COUNTS)}" if count is None else str(count)

    below = [(link.name, *(first_below(link, batch) for batch in batches)) for link in INTERCONNECTS]
    at = [(link.name, *(f"{efficiency(compute, default_batch, gradient_bytes, count, link, speedup):.0%}"
                        for count in EFFICIENCY_AT)) for link in INTERCONNECTS]
    return [f"#### Compute on {_speedup_name(speedup)}", "",
            f"First worker count with efficiency below {threshold:.0%}, by per-worker batch:", "",
            *table(("interconnect", *(f"batch {batch}" for batch in batches)), below), "",
            f"Efficiency at per-worker batch {default_batch}:", "",
            *table(("interconnect", *(f"{count} workers" for count in EFFICIENCY_AT)), at), ""]


def render(compute: ComputeModel, gradient_bytes: float, measured_link: Link, checks: Sequence[Check],
           batches: Sequence[int], speedups: Sequence[float] = (1.0, 50.0), threshold: float = 0.9,
           default_batch: int = 64) -> str:
    """The projection as a Markdown section body."""
    check_rows = [(check.workers, check.batch, f"{check.measured * 1e3:.1f}", f"{check.predicted * 1e3:.1f}",
                   f"{check.error:+.1%}") for check in checks]
    lines = [
        "### Projection past one machine", "",
        "Step time of synchronous data parallelism, p workers each with a fixed per-worker batch b (weak scaling):",
        "`compute(b) / speedup + allreduce(p)`, with a ring all-reduce of the gradients, "
        "`2(p-1)·α + 2(p-1)/p · n / bandwidth`. Efficiency is `step(1) / step(p)`. Assumptions:", "",
        f"- n = {gradient_bytes:,.0f} gradient bytes per step, all-reduced once per step, none of it hidden "
        "behind backprop (conservative).",
        "- The ring: bandwidth-optimal, but its latency term grows with p (trees do better there).",
        "- One worker per machine, full-duplex links, a non-blocking switch: no contention, no stragglers.",
        f"- Interconnects at {LINK_EFFICIENCY:.0%} of line rate, with typical MPI/NCCL small-message latencies α.",
        "- An accelerator only speeds up computation; the input pipeline keeps up.", "",
        f"Fitted compute: {compute.fixed * 1e3:.2f} ms + {compute.per_image * 1e3:.3f} ms/image per step. "
        f"Fitted local link ({measured_link.name}): α = {measured_link.latency * 1e6:.1f} µs, "
        f"{measured_link.bandwidth / 1e9:.2f} GB/s.", "",
        "The model against the measured step times:", "",
        *table(("workers", "per-worker batch", "measured ms", "predicted ms", "error"), check_rows), "",
    ]
    for speedup in speedups:
        lines += _speedup_tables(compute, gradient_bytes, batches, speedup, threshold, default_batch)
    return "\n".join(lines).rstrip() + "\n"


def plot(path: Path, compute: ComputeModel, gradient_bytes: float, batches: Sequence[int], speedup: float = 50.0,
         default_batch: int = 64, batch_link: str = "25 GbE", threshold: float = 0.9) -> None:
    """Efficiency against workers: each interconnect at `default_batch`, dashed: larger `batches` on `batch_link`."""
    plt = pyplot()
    if plt is None:
        return
    drawing, axes = plt.subplots(figsize=(9, 4.5))
    for link in INTERCONNECTS:
        values = [efficiency(compute, default_batch, gradient_bytes, count, link, speedup) for count in WORKER_COUNTS]
        (line,) = axes.plot(WORKER_COUNTS, values, marker="o", label=f"{link.name}, batch {default_batch}")
        if link.name == batch_link:
            larger = sorted(batch for batch in set(batches) if batch > default_batch)
            for batch, dashes in zip(larger, ("--", "-.", (0, (1, 1)), (0, (5, 1)))):
                values = [efficiency(compute, batch, gradient_bytes, count, link, speedup) for count in WORKER_COUNTS]
                axes.plot(WORKER_COUNTS, values, linestyle=dashes, color=line.get_color(),
                          label=f"{link.name}, batch {batch}")
    axes.axhline(threshold, color="grey", linestyle=":", label=f"{threshold:.0%}")
    axes.set_xscale("log", base=2)
    axes.set_xticks(WORKER_COUNTS, [str(count) for count in WORKER_COUNTS])
    axes.set(xlim=(min(WORKER_COUNTS), max(WORKER_COUNTS)), ylim=(0, 1.05), xlabel="workers",
             ylabel="weak-scaling efficiency", title=f"Ring all-reduce projection, compute {speedup:g}x the CPU core")
    axes.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.01, 0.5))  # off the lines
    drawing.tight_layout()
    drawing.savefig(path, dpi=110)
    plt.close(drawing)
