"""The service's processes for real: a dispatcher (fault-tolerant, its journal in a folder) and a worker started as
`python -m hpc_train.data_service.servers`, and a dataset read through `distribute` with the body's variables."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpc_train.data_service.environment import ServiceEnv, address
from hpc_train.data_service.servers import worker_port
from hpc_train.utilization.files import read_service_rows
from tests.net import free_port_block


def test_a_worker_takes_the_port_at_its_place_in_the_step() -> None:
    assert worker_port([30001, 30000], {"SLURM_PROCID": "1"}) == 30000
    assert worker_port([30001], {}) == 30001
    with pytest.raises(ValueError):
        worker_port([30001], {"SLURM_PROCID": "3"})


def test_a_dataset_goes_through_the_service_each_element_once(tmp_path: Path) -> None:
    from hpc_train.data_service import distribute
    from hpc_train.training.keras import tf

    base = free_port_block(2)
    run_dir = tmp_path / "run"
    run_dir.mkdir()  # (the job's run folder: each server samples its CPU use there, utilization/service.py)
    env = {**os.environ, "SLURMD_NODENAME": "localhost", "HPC_TRAIN_RUN_DIR": str(run_dir),
           "HPC_TRAIN_SAMPLE_SECONDS": "0.2"}
    servers = [sys.executable, "-m", "hpc_train.data_service.servers"]
    logs = [open(tmp_path / f"{name}.log", "wb") for name in ("dispatcher", "worker")]
    dispatcher = subprocess.Popen([*servers, "dispatcher", "--port", str(base), "--work-dir",
                                   str(tmp_path / "journal")], env=env, stderr=logs[0])
    worker = subprocess.Popen([*servers, "worker", "--dispatcher", address("localhost", base), "--ports",
                               str(base + 1), "--stop-file", str(tmp_path / "stop")], env=env, stderr=logs[1])
    try:
        service = ServiceEnv(address("localhost", base), "test-job")
        one = distribute(tf.data.Dataset.range(100), service.environ())
        two = distribute(tf.data.Dataset.range(100), service.environ())  # a second rank of the same job
        seen, reading = [], [iter(one), iter(two)]
        while reading:  # the two ranks read side by side, as a job's ranks do
            for stream in list(reading):
                try:
                    seen.append(int(next(stream)))
                except StopIteration:
                    reading.remove(stream)
        assert sorted(seen) == list(range(100))  # each element read once, by one of the two
        assert (tmp_path / "journal").is_dir() and any((tmp_path / "journal").iterdir())
        assert distribute(tf.data.Dataset.range(3), {}) is not None  # no service: the dataset as it was
        for warning in (signal.SIGUSR1, signal.SIGUSR2):  # Slurm's time-limit warnings: not the service's end
            worker.send_signal(warning)
        after = ServiceEnv(service.address, "test-job-after-warnings").environ()
        assert sorted(int(value) for value in distribute(tf.data.Dataset.range(5), after)) == list(range(5))
        names, deadline = {f"dispatcher-localhost-{base}", f"worker-localhost-{base + 1}"}, time.monotonic() + 30
        while {row["name"] for row in read_service_rows(run_dir)} != names and time.monotonic() < deadline:
            time.sleep(0.05)  # (each samples itself every 0.2 s: the first lines, waited for)
        assert {row["name"] for row in read_service_rows(run_dir)} == names
    finally:
        (tmp_path / "stop").touch()  # (the body's, after the step)
        dispatcher.send_signal(signal.SIGTERM)  # (the job's end)
        codes = [process.wait(timeout=30) for process in (worker, dispatcher)]
        for log in logs:
            log.close()
    assert codes == [0, 0]  # an end asked for: the normal end
    assert "data service worker on localhost" in (tmp_path / "worker.log").read_text()
    assert "data service DispatchServer stopped" in (tmp_path / "dispatcher.log").read_text()


def test_a_worker_added_mid_read_takes_a_share_of_the_running_stream_each_element_once() -> None:
    """What `--data-workers auto` counts on (injob/servicesizer.py): the dispatcher gives a worker that registers
    while the ranks read a task of their running job (TensorFlow's servers in this process, on ports of port 0),
    and the stream reads on, each element once."""
    from hpc_train.data_service import distribute
    from hpc_train.training.keras import tf

    service = tf.data.experimental.service
    dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
    at = dispatcher.target.removeprefix("grpc://")
    first = service.WorkerServer(service.WorkerConfig(dispatcher_address=at, heartbeat_interval_ms=200))
    slow = tf.data.Dataset.range(400).map(  # a pipeline that takes its time: the stream runs when the worker comes
        lambda x: tf.py_function(lambda value: (time.sleep(0.005), value)[1], [x], tf.int64))
    stream = iter(distribute(slow, ServiceEnv(dispatcher.target, "auto-job").environ()))
    seen = [int(next(stream)) for _ in range(100)]
    added = service.WorkerServer(service.WorkerConfig(dispatcher_address=at, heartbeat_interval_ms=200))
    tasks = 0
    for value in stream:
        seen.append(int(value))
        tasks = max(tasks, added._num_tasks())  # (TensorFlow's own tests' look at a worker's tasks)
    assert tasks == 1  # the added worker was given the running job's task
    assert sorted(seen) == list(range(400))
    for server in (added, first, dispatcher):
        server._stop()
