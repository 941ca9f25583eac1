"""Bootstrap benchmarks: layout time from 1 to 32,768 tasks, and CLI start-up.

    hpc-train bench bootstrap          # prints, and rewrites BENCHMARKS.md's section
    hpc-train bench bootstrap --quick  # fewer repetitions, nothing written

Every figure is a median over repetitions with its min-max, and each comparison
is run in this one command, interleaved, on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from hpc_train.bench.report import (ROOT, command_line, figure, interleaved, machine, progress, publish, pyplot,
                                    summary)

PLOT = "bootstrap_layout.png"
TASKS_PER_NODE = 8
TASK_COUNTS = (1, 8, 64, 512, 4096, 32768)
LAYOUT_BUDGET_MS = 50.0
CLI_BUDGET_RATIO = 1.5


def step_environment(num_tasks: int) -> dict[str, str]:
    """The last rank of a step of `num_tasks` tasks, 8 per node with 8 GPUs each."""
    nodes = max(1, num_tasks // TASKS_PER_NODE)
    per_node = min(num_tasks, TASKS_PER_NODE)
    return {"SLURM_STEP_NODELIST": f"node[0001-{nodes:04d}]" if nodes > 1 else "node0001",
            "SLURM_STEP_TASKS_PER_NODE": f"{per_node}(x{nodes})", "SLURM_PROCID": str(num_tasks - 1),
            "SLURM_JOB_ID": "123456", "SLURM_GPUS_ON_NODE": str(per_node),
            "CUDA_VISIBLE_DEVICES": ",".join(map(str, range(per_node)))}


def time_layout(num_tasks: int, repetitions: int) -> list[float]:
    """Seconds for what one task does at start: compute the layout and its exported variables."""
    from hpc_train.bootstrap import compute_layout, rank_environment

    env = step_environment(num_tasks)
    samples = []
    for _ in range(repetitions):
        start = time.perf_counter()
        rank_environment(compute_layout(env))
        samples.append(time.perf_counter() - start)
    return samples


def wall_seconds(command: Sequence[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def layout_rows(repetitions: int, progress: Callable[[str], None]) -> list[tuple[int, float, float, float]]:
    rows = []
    for count in TASK_COUNTS:
        progress(f"layout: {count} tasks")
        median, low, high = summary(time_layout(count, repetitions if count < 32768 else max(5, repetitions // 2)),
                                    1000.0)
        rows.append((count, median, low, high))
    return rows


def cli_rows(repetitions: int, progress: Callable[[str], None]) -> dict[str, tuple[float, float, float]]:
    progress("CLI start-up")
    bin_dir = Path(sys.executable).parent
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SLURM")}, **step_environment(8)}
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "hpc-train --help": [str(bin_dir / "hpc-train"), "--help"],
        "hpc-train bootstrap --print (8 tasks)": [str(bin_dir / "hpc-train"), "bootstrap", "--print"],
    }
    runs = {name: (lambda command=command: wall_seconds(command, env)) for name, command in commands.items()}
    samples = interleaved(runs, repetitions, lambda seconds: f"{seconds * 1000:.0f} ms")
    return {name: summary(values, 1000.0) for name, values in samples.items()}


def render(layout: list[tuple[int, float, float, float]], cli: dict[str, tuple[float, float, float]],
           repetitions: int) -> str:
    baseline = cli["python -c pass"][0]
    lines = [
        "## Bootstrap",
        "",
        f"Machine: {machine()}. Command: `{command_line('bootstrap')}` (medians of {repetitions} runs, min-max).",
        "",
        f"### Layout per task (goal: under {LAYOUT_BUDGET_MS:.0f} ms at 32,768 tasks)",
        "",
        "What every task computes at start: the whole layout from its environment, and its TF_CONFIG. "
        f"{TASKS_PER_NODE} tasks and GPUs per node.",
        "",
        "| tasks | median ms | min-max ms | µs per task |",
        "|---:|---:|---:|---:|",
    ]
    lines += [f"| {count:,} | {median:.2f} | {low:.2f}-{high:.2f} | {1000 * median / count:.2f} |"
              for count, median, low, high in layout]
    lines += [
        "",
        f"![layout time against tasks]({figure(PLOT).relative_to(ROOT)})",
        "",
        f"### CLI start-up (goal: `hpc-train --help` under {CLI_BUDGET_RATIO}x `python -c pass`)",
        "",
        "| command | median ms | min-max ms | ratio to `python -c pass` |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| `{name}` | {median:.1f} | {low:.1f}-{high:.1f} | {median / baseline:.2f}x |"
              for name, (median, low, high) in cli.items()]
    return "\n".join(lines)


def plot(layout: list[tuple[int, float, float, float]]) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    counts = [row[0] for row in layout]
    medians = [row[1] for row in layout]
    drawing, axes = plt.subplots(figsize=(6, 4))
    axes.errorbar(counts, medians, yerr=[[m - row[2] for m, row in zip(medians, layout)],
                                         [row[3] - m for m, row in zip(medians, layout)]], marker="o",
                  label="measured (median, min-max)")
    per_task = medians[-1] / counts[-1]
    axes.plot(counts, [per_task * count for count in counts], linestyle="--", label="linear through 32,768")
    axes.axhline(LAYOUT_BUDGET_MS, color="red", linestyle=":", label=f"budget {LAYOUT_BUDGET_MS:.0f} ms")
    axes.set(xscale="log", yscale="log", xlabel="tasks in the step", ylabel="ms per task start",
             title="hpc-train bootstrap: layout + TF_CONFIG")
    axes.legend()
    drawing.tight_layout()
    drawing.savefig(figure(PLOT), dpi=110)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="few repetitions; print only, write nothing")
    args = parser.parse_args(argv)
    repetitions = 5 if args.quick else 21

    layout = layout_rows(repetitions, progress)
    cli = cli_rows(repetitions, progress)
    publish("bootstrap", render(layout, cli, repetitions), not args.quick, lambda: plot(layout))
    worst_ms = layout[-1][1]
    ratio = cli["hpc-train --help"][0] / cli["python -c pass"][0]
    print(json.dumps({"layout_32768_ms": round(worst_ms, 2), "cli_ratio": round(ratio, 2)}), file=sys.stderr)
    return 0 if worst_ms < LAYOUT_BUDGET_MS and ratio < CLI_BUDGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
