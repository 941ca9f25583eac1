"""Trainer runs as real processes, for the trainer's tests: start, watch their output, finish."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.fake_slurm import without_slurm
from tests.mnist_data import shared_mnist
from tests.net import free_port_block

TIMEOUT = 300
EPOCH_LINE = re.compile(r"^hpc-train: epoch (\d+)/(\d+)  loss .* val_accuracy \d\.\d+  .* s  \d+ images/s$", re.M)


def start(output: Path, *settings: str, tf_config: dict | None = None,
          core: int | None = None) -> subprocess.Popen[str]:
    """Run the trainer; `core`: bound to that one core (taskset), as `srun --cpus-per-task=1` would."""
    env = without_slurm()
    if tf_config is not None:
        env["TF_CONFIG"] = json.dumps(tf_config)
    command = [sys.executable, "-m", "hpc_train.train", "--data-dir", str(shared_mnist()), "--output-dir",
               str(output), *(part for setting in settings for part in ("--set", setting))]
    if core is not None:
        command = ["taskset", "-c", str(core), *command]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(processes: list[subprocess.Popen[str]]) -> list[tuple[int, str, str]]:
    """Wait for all; kill the rest if one hangs, so a broken run fails instead of blocking the suite."""
    results = []
    try:
        for process in processes:
            out, err = process.communicate(timeout=TIMEOUT)
            results.append((process.returncode, out, err))
    finally:
        for process in processes:
            process.kill()
    return results


def local_cluster(**counts: int) -> dict[str, list[str]]:
    """A cluster on localhost with free ports: local_cluster(chief=1, ps=1, worker=2)."""
    base = free_port_block(sum(counts.values()))
    cluster, port = {}, base
    for role, count in counts.items():
        cluster[role] = [f"localhost:{port + index}" for index in range(count)]
        port += count
    return cluster


def task_config(cluster: dict[str, list[str]], role: str, index: int) -> dict:
    return {"cluster": cluster, "task": {"type": role, "index": index}}


class Watched:
    """A running task whose output is read as it comes, so a test can act when a line appears."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(stream, lines), daemon=True)
                         for stream, lines in ((process.stdout, self.out), (process.stderr, self.err))]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream, lines: list[str]) -> None:
        for line in iter(stream.readline, ""):
            lines.append(line)

    def wait_for(self, text: str, timeout: float = TIMEOUT) -> None:
        """Return once `text` has appeared on stdout or stderr; fail after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while not any(text in line for line in [*self.out, *self.err]):
            if time.monotonic() > deadline or self.process.poll() is not None:
                time.sleep(0.5)  # the last lines
                if not any(text in line for line in [*self.out, *self.err]):
                    raise AssertionError(f"{text!r} never appeared:\n{''.join(self.err)[-3000:]}")
            time.sleep(0.05)

    def wait_for_file(self, path: Path, timeout: float = TIMEOUT) -> None:
        """Return once `path` exists; fail after `timeout` seconds, or once the task ended without it."""
        deadline = time.monotonic() + timeout
        while not path.exists():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise AssertionError(f"{path} never appeared:\n{''.join(self.err)[-3000:]}")
            time.sleep(0.05)

    def finish(self, timeout: float = TIMEOUT) -> tuple[int, str, str]:
        try:
            code = self.process.wait(timeout=timeout)
        finally:
            self.process.kill()
        for reader in self._readers:
            reader.join(timeout=10)
        return code, "".join(self.out), "".join(self.err)


def metrics(output: Path) -> dict:
    return json.loads((output / "metrics.json").read_text())


def state(output: Path) -> dict:
    return json.loads((output / "state.json").read_text())


def digest(stderr: str) -> str:
    match = re.search(r"finished; weights digest ([0-9a-f]{16})", stderr)
    assert match, stderr[-2000:]
    return match.group(1)
