"""The job's MLflow run: made once, found again by every later attempt, logged to, closed.

The one module that imports MLflow, and only when a job asked for it. Its id, its store and the last epoch
logged are in the run folder's tracking.json (runs/state.py), so a requeued or retried attempt, and
`hpc-train track sync`, go on with the same run. Every request has a short timeout and no retries: MLflow's
own (120 s, 7 retries) would keep a job's end waiting minutes on a dead server.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from hpc_train.errors import HpcTrainError
from hpc_train.runs.goodput import LEDGER_FILE, read_ledger
from hpc_train.runs.ledger import BESIDE, CATEGORIES
from hpc_train.runs.metrics import epochs_in, metrics_path, read_metrics
from hpc_train.runs.state import read_tracking, write_tracking
from hpc_train.tracking.settings import MISSING, TrackSettings, artifact_root, epochs_to_log, params_of, ui_hint

REQUEST_SECONDS = 10
BATCH = 900  # MLflow takes at most 1000 metrics in one log_batch


def client(settings: TrackSettings) -> Any:
    """An MlflowClient for the store, its requests bounded; HpcTrainError (MISSING) without MLflow."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(REQUEST_SECONDS))
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")  # our own line says where, once
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise HpcTrainError(MISSING) from None
    return MlflowClient(tracking_uri=settings.uri)


def experiment_id(mlflow: Any, settings: TrackSettings) -> str:
    """The experiment's id, made when there is none (another job may make it meanwhile: then it is that one)."""
    found = mlflow.get_experiment_by_name(settings.experiment)
    if found is not None:
        return str(found.experiment_id)
    try:
        return str(mlflow.create_experiment(settings.experiment, artifact_location=artifact_root(settings)))
    except Exception:
        found = mlflow.get_experiment_by_name(settings.experiment)
        if found is None:
            raise
        return str(found.experiment_id)


def open_run(mlflow: Any, settings: TrackSettings, run_dir: Path, name: str, tags: dict[str, str],
             params: dict[str, str], reopen: bool = True) -> str:
    """The job's run id: the one tracking.json names in this store (running again, unless not to `reopen`: track
    sync), else a new run with the job's parameters and `tags` (a sweep element's: mlflow.parentRunId)."""
    known = read_tracking(run_dir)
    if known.get("run_id") and known.get("uri") == settings.uri:
        run_id = str(known["run_id"])
        if reopen:
            mlflow.update_run(run_id, status="RUNNING")
        write_tracking(run_dir, last_epoch=max(int(known.get("last_epoch") or 0), last_step(mlflow, run_id)))
        return run_id
    from mlflow.entities import Param

    run = mlflow.create_run(experiment_id(mlflow, settings), run_name=name, tags=tags)
    run_id = str(run.info.run_id)
    mlflow.log_batch(run_id, params=[Param(key, value) for key, value in params.items()])
    write_tracking(run_dir, run_id=run_id, uri=settings.uri, experiment=settings.experiment, last_epoch=0,
                   status=None)
    return run_id


def last_step(mlflow: Any, run_id: str) -> int:
    """The last epoch the run holds (an attempt may have logged it and been ended before it said so)."""
    logged = mlflow.get_run(run_id).data.metrics
    if not logged:
        return 0
    return max((int(point.step) for point in mlflow.get_metric_history(run_id, next(iter(logged)))), default=0)


def log_epochs(mlflow: Any, run_id: str, run_dir: Path) -> int:
    """Log the epochs metrics.json gained since the last one logged (each once); the last epoch logged. The
    trainer's settings too, the first time metrics.json holds them (a job of the slurm/*.sh scripts has no
    config.yaml in its folder: its settings are the trainer's options)."""
    from mlflow.entities import Metric

    figures = read_metrics(run_dir)
    known = read_tracking(run_dir)
    if not known.get("settings_logged") and isinstance(figures.get("config"), dict):
        log_new_params(mlflow, run_id, params_of(figures["config"], {}))
        write_tracking(run_dir, settings_logged=True)
    last = int(known.get("last_epoch") or 0)
    new = epochs_to_log(epochs_in(figures), last)
    if not new:
        return last
    now = int(time.time() * 1000)
    points = [Metric(name, value, now, epoch) for epoch, figures in new for name, value in figures.items()]
    for start in range(0, len(points), BATCH):
        mlflow.log_batch(run_id, metrics=points[start:start + BATCH])
    write_tracking(run_dir, last_epoch=new[-1][0])
    return new[-1][0]


def log_ledger(mlflow: Any, run_id: str, run_dir: Path) -> None:
    """The goodput ledger's totals so far (ledger.json, runs/goodput.py), at the step of the attempts it counts:
    `goodput` and each category's seconds (`ledger_input_seconds`...)."""
    from mlflow.entities import Metric

    made = read_ledger(run_dir)
    if not made.get("attempts") or not isinstance(made.get("total"), dict):
        return
    now, step = int(time.time() * 1000), len(made["attempts"])
    seconds = {**{name: made["total"].get(name) for name in CATEGORIES}, **{name: made.get(name) for name in BESIDE}}
    points = [Metric(f"ledger_{name}_seconds", float(value), now, step) for name, value in seconds.items()
              if isinstance(value, (int, float))]
    if isinstance(made.get("goodput"), (int, float)):
        points.append(Metric("goodput", float(made["goodput"]), now, step))
    mlflow.log_batch(run_id, metrics=points)


def log_new_params(mlflow: Any, run_id: str, params: dict[str, str]) -> None:
    """The parameters the run does not hold yet (MLflow refuses to change one)."""
    from mlflow.entities import Param

    held = mlflow.get_run(run_id).data.params
    new = [Param(key, value) for key, value in params.items() if key not in held]
    if new:
        mlflow.log_batch(run_id, params=new)


def close_run(mlflow: Any, run_id: str, run_dir: Path, status: str, tags: dict[str, str]) -> None:
    """The end: the last epochs, the tags, the final model and metrics.json as artifacts, then the status."""
    from mlflow.entities import RunTag

    log_epochs(mlflow, run_id, run_dir)
    log_ledger(mlflow, run_id, run_dir)
    mlflow.log_batch(run_id, tags=[RunTag(key, value) for key, value in tags.items()])
    for artifact in artifacts(run_dir):
        mlflow.log_artifact(run_id, str(artifact))
    mlflow.set_terminated(run_id, status)
    write_tracking(run_dir, status=status, closed=True)


def artifacts(run_dir: Path) -> list[Path]:
    """What a run's end uploads: the final model, metrics.json and ledger.json, those there are."""
    return [path for path in (Path(run_dir) / "model.keras", metrics_path(run_dir), Path(run_dir) / LEDGER_FILE)
            if path.is_file()]


# A run's statuses once it has ended (MLflow's RunStatus): closed, its end time set.
ENDED = ("FINISHED", "FAILED", "KILLED")


def ended_status(mlflow: Any, run_id: str) -> str | None:
    """The run's status once it has ended (ENDED), else None (RUNNING, SCHEDULED)."""
    status = str(mlflow.get_run(run_id).info.status)
    return status if status in ENDED else None


def fill_closed_run(mlflow: Any, run_id: str, run_dir: Path, status: str, tags: dict[str, str]) -> None:
    """`track sync` of a run already closed: only what it lacks (the epochs not logged, the tags it does not hold,
    the artifacts it has not); its tags, status and end time stay as they are (the job's own, said where it ran)."""
    from mlflow.entities import RunTag

    log_epochs(mlflow, run_id, run_dir)
    held = mlflow.get_run(run_id).data.tags
    missing = [RunTag(key, value) for key, value in tags.items() if key not in held]
    if missing:
        mlflow.log_batch(run_id, tags=missing)
    stored = {Path(artifact.path).name for artifact in mlflow.list_artifacts(run_id)}
    for artifact in artifacts(run_dir):
        if artifact.name not in stored:
            mlflow.log_artifact(run_id, str(artifact))
    write_tracking(run_dir, status=status, closed=True)



def tracked_line(folder: Path, what: str) -> str | None:
    """`hpc-train report`'s line for a tracked job (`what`: run, or a sweep's parent run); None: not tracked."""
    known = read_tracking(folder)
    if not known.get("run_id") or not known.get("uri"):
        return None
    settings = TrackSettings(str(known["uri"]), str(known.get("experiment", "")))
    return f"MLflow {what} {known['run_id']} in experiment {settings.experiment}; see it: {ui_hint(settings)}"
