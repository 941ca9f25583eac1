"""A local MLflow tracking server (an SQLite store in a folder, this machine only): what the tests and
`hpc-train bench tracking` log to, as a job logs to a site's server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from hpc_train.errors import HpcTrainError

START_SECONDS = 120.0  # about 10 s on an idle 2-core machine


def start_server(folder: Path, port: int) -> tuple[subprocess.Popen[bytes], str]:
    """`mlflow server` on 127.0.0.1:`port`, its store and artifacts in `folder`, once it answers /health;
    (its process, its URI). HpcTrainError, with the end of its log, when it does not start."""
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri",
               f"sqlite:///{folder.resolve()}/mlflow.db", "--default-artifact-root",
               str(folder.resolve() / "artifacts"),
               "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    with open(folder / "server.log", "w") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_SECONDS
    while not answers(uri):
        if server.poll() is not None or time.monotonic() > deadline:
            stop_server(server)
            raise HpcTrainError(f"mlflow server did not start: {(folder / 'server.log').read_text()[-2000:]}")
        time.sleep(0.5)
    return server, uri


def free_port() -> int:
    """A port nobody listens on right now, on 127.0.0.1."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def answers(uri: str) -> bool:
    try:
        urllib.request.urlopen(f"{uri}/health", timeout=2).close()
        return True
    except OSError:
        return False


def stop_server(server: subprocess.Popen[bytes]) -> None:
    """The server and its workers (its own process group): TERM, then KILL."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(server.pid, signum)
        except ProcessLookupError:
            return
        try:
            server.wait(10)
            return
        except subprocess.TimeoutExpired:
            continue
