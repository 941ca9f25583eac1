"""What `status` and `report` show of a job's utilization: the one line, the idle GPUs, the picture's path."""

from __future__ import annotations

import time
from pathlib import Path

from hpc_train.utilization import files, plot, serviceplot
from hpc_train.utilization.idle import fresh, idle_lines, states_of, summary_line


def status_lines(run_dir: Path, now: float | None = None) -> list[str]:
    """`GPUs: 6 of 8 busy over 50%; node2 GPU 1 idle for 6 min`, then a line per idle GPU naming its ranks, while
    samples come; once they stopped (the job ended), the last summary and when it was sampled. None sampled: []."""
    states = states_of(files.read_rows(run_dir))
    line = summary_line(states)
    if line is None:
        return []
    now = time.time() if now is None else now
    if fresh(states, now):
        return [line, *(f"  idle: {idle}" for idle in idle_lines(states))]
    last = max(state.last for state in states.values())
    return [f"{line.split(';')[0]} (last sampled {time.strftime('%Y-%m-%d %H:%M', time.localtime(last))})"]


def report_lines(run_dir: Path) -> list[str]:
    """Draw the run's utilization timeline (utilization.png in its folder) and its data service's CPU use
    (data_service.png); a line for each picture drawn."""
    rows = files.read_rows(run_dir)
    path = Path(run_dir) / plot.PICTURE
    service = Path(run_dir) / serviceplot.PICTURE
    return ([f"wrote {path} (utilization per GPU)"] if plot.draw(rows, path) else []) + (
        [f"wrote {service} (the data service's CPU use, per process)"]
        if serviceplot.draw(files.read_service_rows(run_dir), service) else [])
