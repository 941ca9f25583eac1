"""Start-up: task start to the first training steps, against a bare `import tensorflow`.

    hpc-train bench startup [--repetitions N] [--quick]

Every restart pays this again (a requeued job too). Interleaved, each in its own
process: `python -c "import tensorflow"` (the floor any TensorFlow program
pays), the same with tf_keras, and `hpc-train train` with one and with two
multiworker tasks (`hpc-train launch`), whose chief records in metrics.json how
long after its process started the first 32 steps were done. Rewrites its
section of BENCHMARKS.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from hpc_train.bench.report import ROOT, arguments, command_line, machine, progress, publish, spread, table

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "mnist"
HPC_TRAIN = str(Path(sys.executable).parent / "hpc-train")
BASELINE = '`python -c "import tensorflow"`'
QUIET = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}


def wall_seconds(command: Sequence[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=QUIET)
    return time.perf_counter() - started


def first_steps_seconds(data_dir: Path, tasks: int) -> float:
    """The chief's `first_steps_after_seconds`: process start to the first steps_per_execution steps done."""
    with tempfile.TemporaryDirectory(prefix="hpc-train-bench-") as output:
        train = [HPC_TRAIN, "train", "--data-dir", str(data_dir), "--output-dir", output, "--set", "epochs=1",
                 "--set", "steps_per_epoch=32"]
        if tasks > 1:
            train = [HPC_TRAIN, "launch", "--nodes", str(tasks), "--ntasks-per-node", "1", "--", *train, "--set",
                     "strategy=multiworker"]
        subprocess.run(train, check=True, capture_output=True)
        return json.loads((Path(output) / "metrics.json").read_text())["first_steps_after_seconds"]


def contestants(data_dir: Path) -> dict[str, Callable[[], float]]:
    return {
        BASELINE: lambda: wall_seconds([sys.executable, "-c", "import tensorflow"]),
        '`python -c "import tensorflow, tf_keras"`': lambda: wall_seconds(
            [sys.executable, "-c", "import tensorflow, tf_keras"]),
        "`hpc-train train`, one task: first steps done": lambda: first_steps_seconds(data_dir, 1),
        "`hpc-train launch --nodes 2 -- hpc-train train --set strategy=multiworker`: chief's first steps done":
            lambda: first_steps_seconds(data_dir, 2),
    }


def measure(data_dir: Path, repetitions: int) -> dict[str, list[float]]:
    runs = contestants(data_dir)
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for repetition in range(repetitions):
        order = list(runs) if repetition % 2 == 0 else list(reversed(runs))
        for name in order:
            samples[name].append(runs[name]())
        progress(f"repetition {repetition + 1}/{repetitions}: " + ", ".join(f"{samples[n][-1]:.2f} s" for n in runs))
    return samples


def render(samples: dict[str, list[float]]) -> str:
    baseline = samples[BASELINE]
    rows = [(name, *spread(values, 2), *spread([value / base for value, base in zip(values, baseline)], 2))
            for name, values in samples.items()]
    return "\n".join([
        "## Start-up: task start to first training steps",
        "",
        f"Machine: {machine()}. Command: `{command_line('startup')}`: {len(baseline)} interleaved repetitions, "
        "each its own process; seconds of wall-clock time from process start (for `hpc-train train`, the chief's "
        "`first_steps_after_seconds` in metrics.json: its first 32 steps, one `steps_per_execution`, done).",
        "",
        *table(("run", "seconds, median", "min-max", "ratio to import tensorflow", "min-max"), rows),
        "",
        "What the time between the import and the first steps buys: reading MNIST (about 0.05 s), building the "
        "model, and tracing the training step into a graph (about 1 s), which every TensorFlow program pays at "
        "its first step. With two tasks the chief also waits for its peer to check in and for the collective "
        "ring to form. TensorFlow and tf_keras are imported once, in the task itself; the CLI does not import "
        "them (see Bootstrap).",
    ])


def main(argv: Sequence[str] | None = None) -> int:
    parser = arguments("startup", __doc__, repetitions=7)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args(argv)
    publish("startup", render(measure(args.data_dir, 2 if args.quick else args.repetitions)), write=not args.quick)
    return 0
