"""A real MLflow tracking server for the tests (SQLite store, a temporary folder, a free port), once a session for
all its pytest-xdist workers: its start costs more CPU than the tests that log to it (a Python of MLflow's server
and the store's migrations), so the first worker to need it starts it and the last one done stops it."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from tests.net import free_port_block
from tests.once import held, session_folder


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
    from hpc_train.tracking.server import answers, start_server, stop_server

    root = session_folder(tmp_path_factory)
    folder, creating, users = root / "mlflow-server", root / "mlflow-server.lock", root / "mlflow-server.users"
    started: subprocess.Popen[bytes] | None = None
    with held(creating):
        using = _use(users)  # shared by every worker that uses the server, until its session ends
        address = folder / "address"  # "PID URI" of the server running, written once it answers
        if address.exists() and answers(address.read_text().split()[1]):
            pid, uri = address.read_text().split()
        else:
            # Without MLflow's server-side jobs (GenAI evaluation, trace roll-ups: none logged here), whose runner
            # is 8 more Pythons, each importing MLflow, and polling.
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
                started, uri = start_server(folder, free_port_block(1))
            pid = str(started.pid)
            address.write_text(f"{pid} {uri}")
    try:
        yield MlflowServer(uri)
    finally:
        with held(creating):
            using.close()
            if _last(users):  # no other worker uses it any more: stop it
                address.unlink(missing_ok=True)
                if started is not None:
                    stop_server(started)
                else:
                    _stop_group(int(pid))


def _use(users: Path) -> IO[str]:
    handle = users.open("a")  # noqa: SIM115 - held for the session: closing it says this worker is done
    fcntl.flock(handle, fcntl.LOCK_SH)
    return handle


def _last(users: Path) -> bool:
    with users.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(handle, fcntl.LOCK_UN)
        return True


def _stop_group(pid: int) -> None:
    """A server another worker started (its own process group): TERM, then KILL if it is still there in 10 s."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, signum)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if _ended(pid):
                return
            time.sleep(0.1)


def _ended(pid: int) -> bool:
    """Whether the process is gone or has exited (a zombie its starter, still running, has not yet reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True
