"""An MlflowClient in memory, for unit tests of the job body's tracking (tracking/job.py): what it was asked, in
order, and each run's tags, metrics and status, as MLflow's client would hold them. A real server: server.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from hpc_train.tracking import mlflow_run


@dataclass
class FakeRun:
    tags: dict[str, str]
    status: str = "RUNNING"
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    artifacts: list[str] = field(default_factory=list)


class FakeMlflow:
    """The part of MlflowClient that tracking/mlflow_run.py uses."""

    def __init__(self) -> None:
        self.runs: dict[str, FakeRun] = {}
        self.experiments: dict[str, str] = {}
        self.calls: list[str] = []

    def get_experiment_by_name(self, name: str) -> Any:
        return SimpleNamespace(experiment_id=self.experiments[name]) if name in self.experiments else None

    def create_experiment(self, name: str, artifact_location: str | None = None) -> str:
        self.experiments[name] = str(len(self.experiments) + 1)
        return self.experiments[name]

    def create_run(self, experiment_id: str, run_name: str, tags: dict[str, str]) -> Any:
        run_id = f"run{len(self.runs) + 1}"
        self.runs[run_id] = FakeRun(dict(tags))
        self.calls.append(f"create_run {run_id}")
        return SimpleNamespace(info=SimpleNamespace(run_id=run_id))

    def update_run(self, run_id: str, status: str) -> None:
        self.runs[run_id].status = status

    def get_run(self, run_id: str) -> Any:
        run = self.runs[run_id]
        return SimpleNamespace(info=SimpleNamespace(status=run.status),
                               data=SimpleNamespace(params=run.params, metrics=run.metrics, tags=dict(run.tags)))

    def list_artifacts(self, run_id: str) -> list[Any]:
        return [SimpleNamespace(path=path.rsplit("/", 1)[-1]) for path in self.runs[run_id].artifacts]

    def get_metric_history(self, run_id: str, key: str) -> list[Any]:
        return [SimpleNamespace(step=step) for step, _ in self.runs[run_id].metrics.get(key, [])]

    def log_batch(self, run_id: str, metrics: Any = (), params: Any = (), tags: Any = ()) -> None:
        run = self.runs[run_id]
        run.params.update({param.key: param.value for param in params})
        run.tags.update({tag.key: tag.value for tag in tags})
        for metric in metrics:
            run.metrics.setdefault(metric.key, []).append((metric.step, metric.value))

    def log_artifact(self, run_id: str, path: str) -> None:
        self.runs[run_id].artifacts.append(path)

    def set_terminated(self, run_id: str, status: str) -> None:
        self.runs[run_id].status = status
        self.calls.append(f"set_terminated {run_id} {status}")


@pytest.fixture
def fake_mlflow(monkeypatch: pytest.MonkeyPatch) -> FakeMlflow:
    """Every JobTracking of the test talks to this one FakeMlflow (MLflow's entities are the real ones)."""
    pytest.importorskip("mlflow")
    fake = FakeMlflow()
    monkeypatch.setattr(mlflow_run, "client", lambda settings: fake)
    return fake
