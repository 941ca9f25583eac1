"""Start-up: task start to the first training steps, against a bare `import tensorflow`.

    hpc-train bench startup [--repetitions N] [--quick]

Every restart pays this again (a requeued job too). Interleaved, each in its own
process, each measured from its process's start (/proc) to a point inside it:
`python -c "import tensorflow"` to the import done (the floor any TensorFlow
program pays), the same with tf_keras, and `hpc-train train` with one and with
two multiworker tasks (`hpc-train launch`), whose chief records in metrics.json
how long after its process started the first 32 steps were done. Rewrites its
section of BENCHMARKS.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from hpc_train.bench.report import (HPC_TRAIN, command_line, interleaved, machine, parsed, publish, spread, summary,
                                    table)
from hpc_train.runs.metrics import read_metrics

BASELINE = '`python -c "import tensorflow"`'
ONE_TASK = "`hpc-train train`, one task: first steps done"
QUIET = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}


def seconds_after_import(modules: str) -> float:
    """Process start to `import MODULES` done, measured as the trainer measures its first steps (/proc)."""
    code = f"import {modules}\nfrom hpc_train.training.clock import seconds_since_process_start as s\nprint(s())"
    result = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=QUIET)
    return float(result.stdout.strip().splitlines()[-1])


def first_steps_seconds(data_dir: Path, tasks: int) -> float:
    """The chief's `first_steps_after_seconds`: process start to the first steps_per_execution steps done."""
    with tempfile.TemporaryDirectory(prefix="hpc-train-bench-") as output:
        train = [HPC_TRAIN, "train", "--data-dir", str(data_dir), "--output-dir", output, "--set", "epochs=1",
                 "--set", "steps_per_epoch=32"]
        if tasks > 1:
            train = [HPC_TRAIN, "launch", "--nodes", str(tasks), "--ntasks-per-node", "1", "--", *train, "--set",
                     "strategy=multiworker"]
        subprocess.run(train, check=True, capture_output=True)
        return read_metrics(Path(output), strict=True)["first_steps_after_seconds"]


def contestants(data_dir: Path) -> dict[str, Callable[[], float]]:
    return {
        BASELINE: lambda: seconds_after_import("tensorflow"),
        '`python -c "import tensorflow, tf_keras"`': lambda: seconds_after_import("tensorflow, tf_keras"),
        ONE_TASK: lambda: first_steps_seconds(data_dir, 1),
        "`hpc-train launch --nodes 2 -- hpc-train train --set strategy=multiworker`: chief's first steps done":
            lambda: first_steps_seconds(data_dir, 2),
    }


def measure(data_dir: Path, repetitions: int) -> dict[str, list[float]]:
    return interleaved(contestants(data_dir), repetitions, lambda seconds: f"{seconds:.2f} s")


def render(samples: dict[str, list[float]]) -> str:
    baseline = samples[BASELINE]
    rows = [(name, *spread(values, 2), *spread([value / base for value, base in zip(values, baseline)], 2))
            for name, values in samples.items()]
    extra = summary(samples[ONE_TASK])[0] - summary(baseline)[0]
    return "\n".join([
        "## Start-up: task start to first training steps",
        "",
        f"Machine: {machine()}. Command: `{command_line('startup')}`: {len(baseline)} interleaved repetitions, "
        "each its own process; seconds of wall-clock time from the process's start (/proc) to the import done, "
        "or, for `hpc-train train`, to its first 32 steps (one `steps_per_execution`) done: the chief's "
        "`first_steps_after_seconds` in metrics.json.",
        "",
        *table(("run", "seconds, median", "min-max", "ratio to import tensorflow", "min-max"), rows),
        "",
        f"What the {extra:.1f} s between the import and the first steps buy (medians): reading MNIST (about "
        "0.05 s), building the model, and tracing the training step into a graph, which every TensorFlow "
        "program pays at its first step. With two tasks the chief also waits for its peer to check in and for the "
        "collective ring to form. TensorFlow and tf_keras are imported once, in the task itself; the CLI does not "
        "import them (see Bootstrap).",
    ])


def main(argv: Sequence[str] | None = None) -> int:
    args = parsed("startup", __doc__, argv, repetitions=7, data_dir=True)
    publish("startup", render(measure(args.data_dir, 2 if args.quick else args.repetitions)), write=not args.quick)
    return 0
