"""What a tracked job logs, decided without MLflow (pure): where, which parameters, which epochs, which end.

The tracking store defaults to `MLFLOW_TRACKING_URI`, else an SQLite file beside the run folders
(`runs/mlflow.db`), which `mlflow ui` reads when started in `runs/` (its own default store is `./mlflow.db`).
A run's point per epoch is logged once: the epochs after the last one logged (`tracking.json`), so an epoch a
resumed attempt trains again is never logged twice.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpc_train.exitcodes import EXIT_STOPPED

TRACKERS = ("none", "mlflow")
MISSING = "--track mlflow needs MLflow, which is not installed here: pip install 'hpc-train[mlflow]'"
STORE = "mlflow.db"  # the default store, beside the run folders
ARTIFACTS = "mlartifacts"  # ... and its artifacts
# What every rank of a tracked job gets: an unmodified script's mlflow.start_run() joins the job's run.
URI_VARIABLE, EXPERIMENT_VARIABLE, RUN_VARIABLE = "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_RUN_ID"
SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")  # a URI's scheme: http:, postgresql+psycopg2:, ...
NAMED_STORES = ("databricks", "databricks-uc", "uc")  # tracking URIs that are names, not paths
PARAM_LIMIT = 6000  # MLflow's longest parameter value
# Step exits that mean the job was stopped, not that it failed: a stop without requeue, SIGINT, SIGTERM, SIGKILL.
STOPPED_EXITS = (EXIT_STOPPED, 130, 143, 137)


@dataclass(frozen=True)
class TrackSettings:
    """Where a job's run goes: the tracking URI and the experiment's name."""

    uri: str
    experiment: str

    def environment(self, run_id: str) -> dict[str, str]:
        """The variables every rank gets, so that mlflow.start_run() resumes the job's run."""
        return {URI_VARIABLE: self.uri, EXPERIMENT_VARIABLE: self.experiment, RUN_VARIABLE: run_id}


def default_uri(runs: Path) -> str:
    """The store beside the run folders: runs/mlflow.db, as an absolute sqlite URI (every node, any cwd)."""
    return f"sqlite:///{(Path(runs).resolve() / STORE).as_posix()}"  # sqlite:////abs/runs/mlflow.db


def absolute_uri(uri: str, base: Path) -> str:
    """A local store's URI made absolute from `base` (the submit directory), so that the job, which runs in the
    code snapshot, finds the store the user meant: `sqlite:///x.db`, `file:x` and a bare path `x` are relative;
    any other URI (a server, an absolute path, `sqlite:////abs`, `file:///abs`, `databricks`) is kept (pure)."""
    base = Path(base)
    if uri.startswith("sqlite:///") and uri != "sqlite:///" and not uri[len("sqlite:///"):].startswith("/"):
        return f"sqlite:///{base / uri[len('sqlite:///'):]}"
    if uri.startswith("file:") and not uri[len("file:"):].startswith("/"):
        return f"file://{base / uri[len('file:'):]}"
    if not uri or SCHEME.match(uri) or uri in NAMED_STORES or Path(uri).expanduser().is_absolute():
        return uri
    return str(base / uri)  # a bare path: MLflow's file store, as `mlruns` or `./runs/mlruns`


def resolve(uri: str | None, experiment: str | None, env: Mapping[str, str], runs: Path,
            job_name: str) -> TrackSettings:
    """The settings of a job: --tracking-uri, else MLFLOW_TRACKING_URI, else runs/mlflow.db; --experiment, else
    the job's name."""
    return TrackSettings(uri or env.get(URI_VARIABLE) or default_uri(runs), experiment or job_name)


def artifact_root(settings: TrackSettings) -> str | None:
    """Where a new experiment in a local SQLite store keeps its artifacts: beside the store (MLflow's own default
    is ./mlruns wherever the job started); None for a server, which has its own."""
    if not settings.uri.startswith("sqlite:///"):
        return None
    return (Path(settings.uri[len("sqlite:///"):]).parent / ARTIFACTS).as_uri()


def ui_hint(settings: TrackSettings) -> str:
    """Where to see a run: the server's address, or the command that shows a local store."""
    if settings.uri.startswith(("http://", "https://")):
        return settings.uri
    return f"mlflow ui --backend-store-uri {settings.uri}"


def params_of(config: Mapping[str, Any], record: Mapping[str, Any]) -> dict[str, str]:
    """The job's settings as MLflow parameters: config.yaml's keys (a command has none), then the job's shape."""
    job = {key: record[key] for key in ("nodes", "tasks", "strategy") if record.get(key) is not None}
    if record.get("command"):
        job["command"] = " ".join(map(str, record["command"]))
    values = {**{key: value for key, value in config.items() if value is not None}, **job}
    return {str(key): str(value)[:PARAM_LIMIT] for key, value in values.items()}


def epochs_to_log(epochs: Sequence[Mapping[str, Any]], last_logged: int) -> list[tuple[int, dict[str, float]]]:
    """(epoch, its figures) for each epoch after `last_logged`, oldest first: every finite number an epoch of
    metrics.json holds, under its own name (the epoch itself is the step)."""
    found: dict[int, dict[str, float]] = {}
    for epoch in epochs:
        number = epoch.get("epoch")
        if isinstance(number, int) and not isinstance(number, bool) and number > last_logged:
            found[number] = {name: float(value) for name, value in epoch.items() if name != "epoch"
                             and isinstance(value, (int, float)) and not isinstance(value, bool)
                             and math.isfinite(value)}
    return sorted(found.items())


def final_status(step_code: int, job_code: int, state: Mapping[str, Any], since: float) -> str | None:
    """How the job's run ends after this attempt: FINISHED, FAILED or KILLED; None while the job goes on (the
    trainer or a command requeued it, or the epilogue retried it). `state`: state.json, whose state counts when
    written in this attempt (after `since`)."""
    recent = state.get("state") if _number(state.get("time")) >= since else None
    if recent == "requeued":
        return None
    if step_code == 0:
        return "FINISHED"  # finished, pruned (tagged so), or a command's own success
    if job_code == 0:
        return None  # failed, and retried: the next attempt goes on with the same run
    return "KILLED" if recent == "stopped" or step_code in STOPPED_EXITS else "FAILED"


def status_from_folder(state: Mapping[str, Any], verdict: str | None) -> str | None:
    """A finished run folder's end, for `track sync`: the job body's verdict when it made one, else state.json's
    (finished or pruned: FINISHED, stopped: KILLED, a last attempt that failed: FAILED); None: not over."""
    if verdict:
        return verdict
    attempts = state.get("attempts")
    last = attempts[-1] if isinstance(attempts, list) and attempts and isinstance(attempts[-1], dict) else {}
    if last.get("action") == "failed":
        return "FAILED"
    return {"finished": "FINISHED", "pruned": "FINISHED", "stopped": "KILLED"}.get(str(state.get("state")))


# How Slurm's word on a job that ended (scontrol, squeue, else sacct: its first word) ends its run, for `track sync`
# where the job body could not say (a SIGTERM with no answer from Slurm, a SIGKILL): ended by Slurm or its node,
# KILLED; failed by itself, FAILED. Any other state (PENDING, RUNNING, REQUEUED, COMPLETING, ...): not over yet.
SLURM_ENDS = {"CANCELLED": "KILLED", "TIMEOUT": "KILLED", "PREEMPTED": "KILLED", "NODE_FAIL": "KILLED",
              "DEADLINE": "KILLED", "FAILED": "FAILED", "OUT_OF_MEMORY": "FAILED", "BOOT_FAIL": "FAILED",
              "COMPLETED": "FINISHED"}


def status_from_slurm(state: str) -> str | None:
    """The run's end as Slurm's state of its job says it (pure; SLURM_ENDS); None: not over, or not known."""
    return SLURM_ENDS.get((state.split() or [""])[0])


def tags_of(record: Mapping[str, Any], state: Mapping[str, Any], nodes: str | None, attempts_said: Sequence[str],
            run_dir: Path, provenance: Mapping[str, Any]) -> dict[str, str]:
    """The run's tags: the job, where it ran, its run folder (as given: absolute, for any cwd), its attempts and
    why, a pruned element's verdict, and the code it ran as provenance.json recorded it at submit (the job runs in
    a snapshot, no git checkout: git cannot be asked there)."""
    tags = {"hpc_train.job_id": str(record.get("job_id", "")), "hpc_train.strategy": str(record.get("strategy", "")),
            "hpc_train.nodes": nodes or str(record.get("nodes", "")), "hpc_train.attempts": str(1 + len(attempts_said)),
            "hpc_train.run_dir": str(run_dir)}
    if attempts_said:
        tags["hpc_train.attempts_why"] = "; ".join(attempts_said)[:PARAM_LIMIT]
    if state.get("state") == "pruned":
        tags.update({"pruned": "true", "hpc_train.pruned_why": str(state.get("reason", ""))})
    return {**tags, **code_tags(provenance)}


def code_tags(provenance: Mapping[str, Any]) -> dict[str, str]:
    """The commit (MLflow's own tag, which its UI shows), whether the tree had uncommitted changes, the snapshot's
    digest: each where provenance.json has it."""
    tags = {}
    if isinstance(provenance.get("commit"), str) and provenance["commit"]:
        tags["mlflow.source.git.commit"] = provenance["commit"]
    if isinstance(provenance.get("dirty"), bool):
        tags["hpc_train.git_dirty"] = str(provenance["dirty"]).lower()
    snapshot = provenance.get("snapshot")
    if isinstance(snapshot, Mapping) and snapshot.get("digest"):
        tags["hpc_train.snapshot"] = str(snapshot["digest"])
    return tags


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0
