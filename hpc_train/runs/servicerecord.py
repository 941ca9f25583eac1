"""The run folder's record of the job's tf.data service (`data_service.json`), and what `status` says of it.

The job body writes it (injob/dataservice.py) as the service's processes change: where the dispatcher listens, the
workers' ports, how many times the workers' step was started again (injob/serviceguard.py), whether the
service runs, was stopped after the step, or could not start, and `--data-workers auto`'s sizing (`auto`, which
the next attempt starts from: injob/servicesizer.py). `status` adds what Slurm says of the service's steps
now (their step names, STEP_NAMES: listed by `squeue --steps` while they run), so that a line says each process's
state. Reading never raises.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpc_train.runs.state import read_json_object, write_json_atomically

RECORD_FILE = "data_service.json"
DISPATCHER_STEP = "hpc-train-data-dispatcher"
WORKERS_STEP = "hpc-train-data-workers"
STEP_NAMES = (DISPATCHER_STEP, WORKERS_STEP)
_WRITING = threading.Lock()


def note_service(run_dir: Path, **fields: Any) -> None:
    """Add `fields` to the record (never raises: a job must not fail on what status shows). The body's threads (the
    steps' guards, auto's sizer) and its main thread write it: one at a time, so that none loses another's field."""
    path = Path(run_dir) / RECORD_FILE
    with _WRITING:
        try:
            write_json_atomically(path, {**read_json_object(path), **fields})
        except OSError:
            pass


def read_service(run_dir: Path) -> dict[str, Any]:
    return read_json_object(Path(run_dir) / RECORD_FILE)


def service_lines(record: Mapping[str, Any], running: Mapping[str, str] | None) -> list[str]:
    """`status`'s lines of the service (pure): none for a job without one. `running`: step name -> step id of the
    service's steps Slurm lists as running now; None when Slurm was not asked (the job has ended)."""
    if not record:
        return []
    state = str(record.get("state", "?"))
    if state != "running" or running is None:
        said = {"stopped": "stopped after the ranks' step", "not started": "did not start; the ranks read their input "
                "themselves", "running": "ended with the job"}.get(state, state)
        return [f"  data service: {said}{restarts_words(record)}{auto_words(record)}"]
    workers = record.get("workers", [])
    return [f"  data service: dispatcher {record.get('address', '?')} {step_state(running, DISPATCHER_STEP)}; "
            f"{len(workers)} data worker(s) on port(s) {','.join(map(str, workers))} "
            f"{step_state(running, WORKERS_STEP)}{restarts_words(record)}{auto_words(record)}"]


def step_state(running: Mapping[str, str], name: str) -> str:
    return f"running (step {running[name]})" if name in running else "not running"


def restarts_words(record: Mapping[str, Any]) -> str:
    count = record.get("restarts", 0)
    return f", its workers started again {count} time(s)" if isinstance(count, int) and count > 0 else ""


def auto_words(record: Mapping[str, Any]) -> str:
    """`--data-workers auto`'s size and limit (data_service/autosize.py's Sizing, kept as `auto`), and why it grows no
    more when it does not; nothing for a service of a fixed size."""
    auto = record.get("auto")
    if not isinstance(auto, Mapping) or not isinstance(auto.get("workers"), int):
        return ""
    settled = auto.get("settled")
    return (f"; auto: {auto['workers']} worker(s) of at most {auto.get('limit', '?')}"
            + (f", stays ({settled})" if isinstance(settled, str) else ""))
