"""What every benchmark script shares: medians with min-max, and its own section of BENCHMARKS.md."""

from __future__ import annotations

import re
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS_MD = ROOT / "BENCHMARKS.md"


def summary(samples: Sequence[float], scale: float = 1.0) -> tuple[float, float, float]:
    """(median, min, max), each times `scale`."""
    return statistics.median(samples) * scale, min(samples) * scale, max(samples) * scale


def write_section(name: str, body: str) -> None:
    """Replace this benchmark's section of BENCHMARKS.md (between its markers), or append it."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    section = f"{begin}\n{body.strip()}\n\n{end}"
    text = BENCHMARKS_MD.read_text() if BENCHMARKS_MD.exists() else "# Benchmarks\n"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip() + "\n\n" + section + "\n"
    BENCHMARKS_MD.write_text(text)


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def pyplot():
    """matplotlib's pyplot for files, or None (with a note) when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        progress("matplotlib missing (env/setup.sh test,bench): no plot")
        return None
    return plt
