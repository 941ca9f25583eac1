"""What every benchmark shares: where results go, medians with min-max, tables, its BENCHMARKS.md section.

Results go to the checkout hpc-train runs from (BENCHMARKS.md and the plots in
benchmarks/), or, for an installed copy, to the current directory.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from hpc_train.training.precision import cpu_flags, vector_units

_CHECKOUT = Path(__file__).resolve().parents[2]
ROOT = _CHECKOUT if (_CHECKOUT / "pyproject.toml").is_file() else Path.cwd()
BENCHMARKS_MD = ROOT / "BENCHMARKS.md"
FIGURES = ROOT / "benchmarks"
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "mnist"  # the staged MNIST beside the checkout
HPC_TRAIN = str(Path(sys.executable).parent / "hpc-train")  # this environment's, whatever PATH says


def summary(samples: Sequence[float], scale: float = 1.0) -> tuple[float, float, float]:
    """(median, min, max), each times `scale`."""
    return statistics.median(samples) * scale, min(samples) * scale, max(samples) * scale


def spread(samples: Sequence[float], digits: int = 0, scale: float = 1.0) -> tuple[str, str]:
    """('median', 'min-max') as text, with thousands separators."""
    median, low, high = summary(samples, scale)
    return f"{median:,.{digits}f}", f"{low:,.{digits}f}-{high:,.{digits}f}"


def table(header: Sequence[str], rows: Iterable[Sequence[object]], align: str = "") -> list[str]:
    """A Markdown table; `align` has one letter per column, l or r (default: first l, the rest r)."""
    align = align or "l" + "r" * (len(header) - 1)
    rule = "|" + "|".join("---:" if side == "r" else "---" for side in align) + "|"
    return ["| " + " | ".join(header) + " |", rule, *("| " + " | ".join(str(cell) for cell in row) + " |"
                                                      for row in rows)]


def machine() -> str:
    """This machine in one phrase: CPU model, cores, and its vector and matrix units ("AVX2" against "AVX-512, AMX,
    bf16"): figures from CPUs with different units are not comparable, and precision: auto differs on them."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
                 "")
    return (f"{model or platform.processor() or platform.machine()}, {os.cpu_count()} cores "
            f"({vector_units(cpu_flags(cpuinfo))}), Python {platform.python_version()}")


def command_line(name: str, *args: str) -> str:
    return " ".join(["hpc-train bench", name, *args])


def write_section(name: str, body: str) -> None:
    """Replace this benchmark's section of BENCHMARKS.md (between its markers), or append it."""
    begin, end = f"<!-- bench_{name}:begin -->", f"<!-- bench_{name}:end -->"
    section = f"{begin}\n{body.strip()}\n\n{end}"
    text = BENCHMARKS_MD.read_text() if BENCHMARKS_MD.exists() else "# Benchmarks\n"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip() + "\n\n" + section + "\n"
    BENCHMARKS_MD.write_text(text)


def figure(name: str) -> Path:
    FIGURES.mkdir(exist_ok=True)
    return FIGURES / name


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def pyplot():
    """matplotlib's pyplot for files, or None (with a note) when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        progress("matplotlib missing (a dependency of hpc-train: pip install matplotlib): no plot")
        return None
    return plt


def slurm_reachable() -> bool:
    from hpc_train.slurm.client import SlurmClient

    return SlurmClient.local().answers()


def require_slurm(name: str) -> bool:
    """Whether Slurm answers; if not, say in one line how to get one."""
    if slurm_reachable():
        return True
    print(f"hpc-train bench {name}: no Slurm answers: run `hpc-train cluster up` and export the SLURM_CONF it "
          "prints", file=sys.stderr)
    return False


def interleaved(runs: dict[str, Callable[[], float]], repetitions: int,
                shown: Callable[[float], str]) -> dict[str, list[float]]:
    """Each run once per repetition, the order reversed every other one, so drift hits all alike."""
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for repetition in range(repetitions):
        for name in list(runs) if repetition % 2 == 0 else list(reversed(runs)):
            samples[name].append(runs[name]())
        progress(f"repetition {repetition + 1}/{repetitions}: " + ", ".join(shown(samples[n][-1]) for n in runs))
    return samples


def arguments(name: str, description: str, repetitions: int, data_dir: bool = False,
              **counts: int) -> argparse.ArgumentParser:
    """A benchmark's parser with the options every one has, --repetitions and --quick; --data-dir (the staged
    MNIST) if asked; and one integer option per count, e.g. trials=8 for `--trials N` (default 8)."""
    parser = argparse.ArgumentParser(prog=f"hpc-train bench {name}", description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repetitions", type=int, default=repetitions)
    parser.add_argument("--quick", action="store_true", help="2 repetitions; print only")
    for count, default in counts.items():
        parser.add_argument(f"--{count.replace('_', '-')}", type=int, default=default)
    if data_dir:
        parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    return parser


def parsed(name: str, description: str, argv: Sequence[str] | None, repetitions: int, data_dir: bool = False,
           **counts: int) -> argparse.Namespace:
    """A benchmark's command line, read by `arguments`' parser."""
    return arguments(name, description, repetitions, data_dir, **counts).parse_args(argv)


def opening(title: str, setup: str) -> list[str]:
    """A section's first lines: its title, then the machine it ran on, followed by `setup` (from its punctuation
    on: how it was measured)."""
    return [f"## {title}", "", f"Machine: {machine()}{setup}"]


def median_bars(axes: Any, samples: Sequence[Sequence[float]], labels: Sequence[str], ours: Sequence[bool],
                goal: tuple[float, str]) -> None:
    """Horizontal bars of each run's median with min-max whiskers, top to bottom, ours blue and the others grey,
    and a red line at the first run's median times `goal`'s factor, labelled with its text."""
    medians = [statistics.median(values) for values in samples]
    errors = [[m - min(v) for m, v in zip(medians, samples)], [max(v) - m for m, v in zip(medians, samples)]]
    axes.barh(range(len(labels)), medians, xerr=errors, color=["tab:blue" if own else "grey" for own in ours])
    axes.set_yticks(range(len(labels)), labels)
    axes.axvline(medians[0] * goal[0], color="red", linestyle=":", label=goal[1])
    axes.invert_yaxis()
    axes.legend(loc="lower right", framealpha=1.0)


def publish(name: str, section: str, write: bool, *plots: Callable[[], object]) -> None:
    """Print the section; unless it was a quick look, put it into BENCHMARKS.md and draw its plots."""
    print(section)
    if write:
        write_section(name, section)
        for draw in plots:
            draw()
        progress(f"wrote BENCHMARKS.md{' and its plots in benchmarks/' if plots else ''}")
