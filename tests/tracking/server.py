"""A real MLflow tracking server for the tests (SQLite store, a temporary folder, a free port), once a session."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.net import free_port_block


@dataclass(frozen=True)
class MlflowServer:
    uri: str

    def client(self) -> Any:
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self.uri)

    def runs(self, experiment: str) -> list[Any]:
        """The experiment's runs ([] when there is no such experiment)."""
        client = self.client()
        found = client.get_experiment_by_name(experiment)
        return list(client.search_runs([found.experiment_id])) if found is not None else []

    def steps(self, run_id: str, key: str) -> list[int]:
        """The steps logged for one metric, in order: each epoch once."""
        return sorted(point.step for point in self.client().get_metric_history(run_id, key))


def dead_uri() -> str:
    """A server nobody runs: the port free a moment ago."""
    return f"http://127.0.0.1:{free_port_block(1)}"


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    pytest.importorskip("mlflow")
    from hpc_train.tracking.server import start_server, stop_server

    server, uri = start_server(tmp_path_factory.mktemp("mlflow-server"), free_port_block(1))
    try:
        yield MlflowServer(uri)
    finally:
        stop_server(server)
