"""The job's data service around the step: its srun steps, their ports, the start line's words; and a service that
cannot start costs the job only its speed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hpc_train.bootstrap.ports import derived_window
from hpc_train.injob.dataservice import (batch_host, plan_ports, server_steps, service_slurm, serving_data,
                                        start_words, step_tasks, worker_nodes)
from hpc_train.injob.jobline import JobBody
from hpc_train.spec.data_service import DataService

JOB = {"SLURM_JOB_ID": "5151", "SLURM_NTASKS": "2", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "node[1-2]",
       "SLURMD_NODENAME": "node1"}


def body(tmp_path: Path, workers: int = 2) -> JobBody:
    return JobBody(tmp_path / "run", nodes=2, tasks_per_node=1, data_service=DataService(workers, cpus=2))


def test_the_steps_overlap_the_ranks_and_listen_at_the_top_of_the_window(tmp_path: Path) -> None:
    job = body(tmp_path)
    ports = plan_ports(job, JOB)
    window = derived_window(5151, 2, 1)
    assert ports.dispatcher == window.stop - 1 and ports.workers == (window.stop - 2, window.stop - 3)
    dispatcher, workers = server_steps(job, JOB, ports, batch_host(JOB), "/venv/bin/python")
    assert dispatcher[0] == "--overlap" and "--nodelist=node1" in dispatcher and "--ntasks=1" in dispatcher
    run = (tmp_path / "run").resolve()
    stop = ["--stop-file", str(run / "data_service.stop")]
    assert dispatcher[-6:] == ["--port", str(ports.dispatcher), "--work-dir", str(run / "data_service"), *stop]
    assert "--overlap" in workers and "--ntasks=2" in workers and "--nodes=2" in workers
    # srun is not told the job's tasks a node, which it would take for the step's and say it ignores.
    assert "SLURM_NTASKS_PER_NODE" not in service_slurm({**JOB, "SLURM_NTASKS_PER_NODE": "2"}).env
    assert "--cpus-per-task=2" in workers
    assert workers[-6:] == ["--dispatcher", f"grpc://node1:{ports.dispatcher}", "--ports",
                            f"{ports.workers[0]},{ports.workers[1]}", *stop]


def test_autos_added_worker_is_a_step_of_one_task_at_its_own_port_and_log(tmp_path: Path) -> None:
    from hpc_train.injob.dataservice import one_worker

    job = JobBody(tmp_path / "run", nodes=2, tasks_per_node=1, data_service=DataService(1, cpus=2, auto=True))
    ports = plan_ports(job, JOB)
    assert len(ports.workers) == 8  # the window holds the most auto may run
    _, workers = server_steps(job, JOB, ports, "node1", "/venv/bin/python", 1)
    assert "--ntasks=1" in workers and workers[-4:-2] == ["--ports", str(ports.workers[0])]
    added = one_worker(job, JOB, ports, "node1", "node2", 1, "/venv/bin/python")
    run = (tmp_path / "run").resolve()
    assert added[:5] == ["--overlap", "--quiet", "--kill-on-bad-exit=0", "--open-mode=append",
                         "--job-name=hpc-train-data-workers"]
    assert {"--nodes=1", "--ntasks=1", "--nodelist=node2", "--cpus-per-task=2",
            f"--output={run}/logs/data-worker-1.out"} <= set(added)
    assert added[-7:] == ["worker", "--dispatcher", f"grpc://node1:{ports.dispatcher}", "--ports",
                          str(ports.workers[1]), "--stop-file", str(run / "data_service.stop")]


def test_the_workers_spread_over_as_many_nodes_as_the_job_has() -> None:
    assert worker_nodes(5, JOB) == 2
    assert worker_nodes(1, JOB) == 1


def test_the_step_counts_its_ranks_as_the_bootstrap_does(tmp_path: Path) -> None:
    assert step_tasks(body(tmp_path), JOB) == 2
    assert step_tasks(body(tmp_path), {"SLURM_HET_SIZE": "2", "SLURM_NTASKS_HET_GROUP_0": "2",
                                       "SLURM_NTASKS_HET_GROUP_1": "3"}) == 5
    assert step_tasks(body(tmp_path), {}) == 2


def test_the_start_line_says_the_trade(tmp_path: Path) -> None:
    assert start_words(JobBody(tmp_path)) == ""
    words = start_words(body(tmp_path))
    assert "2 data worker(s)" in words and "example order not exact" in words


def test_without_slurm_the_ranks_read_their_own_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with serving_data(body(tmp_path), {"A": "1"}, 1, under_slurm=False) as env:
        assert env == {"A": "1"}
    assert "runs as Slurm steps" in capsys.readouterr().err


def test_a_dispatcher_that_never_listens_is_one_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """srun's step ends at once (the dispatcher could not start): the ranks go on without the service, and the
    steps started are ended after the step."""
    import subprocess

    from hpc_train.injob import dataservice
    from hpc_train.slurm.client import SlurmClient

    started: list[subprocess.Popen[bytes]] = []

    def start_step(self: SlurmClient, arguments: list[str]) -> subprocess.Popen[bytes]:
        started.append(subprocess.Popen(["false"]))
        return started[-1]

    monkeypatch.setattr(SlurmClient, "start_step", start_step)
    monkeypatch.setattr(dataservice, "batch_host", lambda env: "127.0.0.1")
    with serving_data(body(tmp_path), JOB, 1, under_slurm=True) as env:
        assert "HPC_TRAIN_DATA_SERVICE" not in env
    assert len(started) == 1 and started[0].poll() is not None
    err = capsys.readouterr().err
    assert "did not start" in err and "read their input themselves" in err


def test_the_bodys_start_line_says_the_trade(tmp_path: Path) -> None:
    from hpc_train.injob.body import start_line

    line = start_line(body(tmp_path), {**JOB, "SLURM_JOB_NUM_NODES": "2"})
    assert line.startswith("hpc-train: job 5151 on node[1-2], 2 tasks; input through the tf.data service: 2 data "
                           "worker(s) of 2 CPU(s) beside the ranks (example order not exact); logs and results in ")
    assert "tf.data" not in start_line(JobBody(tmp_path / "run", nodes=2), JOB)


def test_workers_that_never_listen_leave_the_ranks_their_own_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The dispatcher listens (a socket of this test's), the workers' srun ends at once: no service for the ranks,
    one warning, both steps ended after."""
    import socket
    import subprocess

    from hpc_train.injob import dataservice
    from hpc_train.slurm.client import SlurmClient

    listening = socket.create_server(("127.0.0.1", 0))
    silent = socket.socket()  # bound, never listening: a port no worker took, and no one else can
    silent.bind(("127.0.0.1", 0))
    started: list[subprocess.Popen[bytes]] = []

    def start_step(self: SlurmClient, arguments: list[str]) -> subprocess.Popen[bytes]:
        started.append(subprocess.Popen(["sleep", "60"] if "dispatcher" in arguments else ["false"]))
        return started[-1]

    monkeypatch.setattr(SlurmClient, "start_step", start_step)
    monkeypatch.setattr(dataservice, "batch_host", lambda env: "127.0.0.1")
    monkeypatch.setattr(dataservice, "job_nodes", lambda env: ("127.0.0.1",))
    monkeypatch.setattr(dataservice, "plan_ports", lambda body, env: dataservice.ServicePorts(
        listening.getsockname()[1], (silent.getsockname()[1],)))
    monkeypatch.setattr(dataservice, "STOP_GRACE", 0.5)
    with listening, silent, serving_data(body(tmp_path, workers=1), JOB, 1, under_slurm=True) as env:
        assert "HPC_TRAIN_DATA_SERVICE" not in env
    assert len(started) == 2 and all(process.poll() is not None for process in started)
    assert "workers did not all start" in capsys.readouterr().err


def test_a_step_that_cannot_start_at_all_is_one_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from hpc_train.slurm.client import SlurmClient

    def start_step(self: SlurmClient, arguments: list[str]) -> None:
        raise FileNotFoundError("srun")

    monkeypatch.setattr(SlurmClient, "start_step", start_step)
    with serving_data(body(tmp_path), JOB, 1, under_slurm=True) as env:
        assert "HPC_TRAIN_DATA_SERVICE" not in env
    assert "warning: no data service (FileNotFoundError: srun)" in capsys.readouterr().err


def test_workers_the_jobs_cpus_cannot_hold_start_nothing_and_say_why_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A one-node job holding 1 CPU, 2 workers: srun would refuse their step ("More processors requested than
    permitted"); nothing is started, one line names the problem and the fix, the ranks read their own input."""
    from hpc_train.slurm.client import SlurmClient

    started: list[list[str]] = []
    monkeypatch.setattr(SlurmClient, "start_step", lambda self, arguments: started.append(arguments))
    one_cpu = {**JOB, "SLURM_JOB_NUM_NODES": "1", "SLURM_JOB_NODELIST": "node1", "SLURM_NTASKS": "1",
               "SLURM_JOB_CPUS_PER_NODE": "1"}
    job = JobBody(tmp_path / "run", nodes=1, data_service=DataService(2))
    with serving_data(job, one_cpu, 1, under_slurm=True) as env:
        assert "HPC_TRAIN_DATA_SERVICE" not in env
    assert started == []
    lines = [line for line in capsys.readouterr().err.splitlines() if line]
    assert lines == ["hpc-train: warning: no data service: its 2 data worker(s) of 1 CPU(s) need 2 CPU(s) on node1 "
                     "(2 of them there), and this job holds 1 there; ask for fewer (--data-workers, --data-cpus), "
                     "whole nodes (--exclusive), or a partition of their own (--data-partition P); the ranks read "
                     "their input themselves"]


def test_a_workers_step_that_ends_while_the_ranks_run_is_started_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The dispatcher and the worker listen (sockets of this test's); the workers' first srun ends during the step:
    a second is started with the same arguments, and both steps end after the step."""
    import socket
    import subprocess
    import threading

    from hpc_train.injob import dataservice
    from hpc_train.slurm.client import SlurmClient

    dispatcher, worker = socket.create_server(("127.0.0.1", 0)), socket.create_server(("127.0.0.1", 0))
    started: list[tuple[list[str], subprocess.Popen[bytes]]] = []
    again = threading.Event()

    def start_step(self: SlurmClient, arguments: list[str]) -> subprocess.Popen[bytes]:
        first_worker = "worker" in arguments and not any("worker" in args for args, _ in started)
        process = subprocess.Popen(["sh", "-c", "read x"] if first_worker else ["sleep", "60"], stdin=subprocess.PIPE)
        started.append((arguments, process))
        if "worker" in arguments and not first_worker:
            again.set()
        return process

    monkeypatch.setattr(SlurmClient, "start_step", start_step)
    monkeypatch.setattr(dataservice, "batch_host", lambda env: "127.0.0.1")
    monkeypatch.setattr(dataservice, "job_nodes", lambda env: ("127.0.0.1",))
    monkeypatch.setattr(dataservice, "plan_ports", lambda body, env: dataservice.ServicePorts(
        dispatcher.getsockname()[1], (worker.getsockname()[1],)))
    monkeypatch.setattr(dataservice, "STOP_GRACE", 0.5)
    with dispatcher, worker, serving_data(body(tmp_path, workers=1), JOB, 1, under_slurm=True) as env:
        assert env["HPC_TRAIN_DATA_SERVICE"] == f"grpc://127.0.0.1:{dispatcher.getsockname()[1]}"
        assert env["HPC_TRAIN_SERVICE_PORTS"] == "2"
        started[1][1].communicate(b"\n")  # the lone worker's srun ends
        assert again.wait(30)
    assert [args for args, _ in started][1] == [args for args, _ in started][2]
    assert all(process.poll() is not None for _, process in started)
    assert "its workers' step ended (exit 0) while the ranks ran; started again (restart 1" in capsys.readouterr().err


def wait_for(condition: Any, seconds: float = 30.0) -> bool:
    """Polls `condition` (a file's state another thread writes) until it holds, or `seconds` passed."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def test_auto_adds_a_worker_while_input_waits_and_the_next_attempt_starts_at_that_size(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        request: pytest.FixtureRequest) -> None:
    """`--data-workers auto` in the body: one worker first; an epoch that waited 34% on its input adds a second
    (a step of one task at the next port), the next epoch's 5% says it helped and stays; the kept size starts the
    next attempt's workers' step with two. The job's CPUs (2 of each node's 2, beside 2 ranks) limit it to 2."""
    import socket
    import subprocess
    import threading

    from hpc_train.injob import dataservice, servicesizer
    from hpc_train.runs.goodput import ranks_path
    from hpc_train.runs.servicerecord import read_service
    from hpc_train.runs.state import write_json_atomically
    from hpc_train.slurm.client import SlurmClient

    servers = [socket.create_server(("127.0.0.1", 0)) for _ in range(3)]  # the dispatcher, workers 1 and 2
    dispatcher, first, second = (server.getsockname()[1] for server in servers)
    started: list[tuple[list[str], subprocess.Popen[bytes]]] = []
    added = threading.Event()

    def start_step(self: SlurmClient, arguments: list[str]) -> subprocess.Popen[bytes]:
        started.append((arguments, subprocess.Popen(["sleep", "60"])))
        if "--ntasks=1" in arguments and "worker" in arguments and "--nodelist=127.0.0.1" in arguments:
            added.set()
        return started[-1][1]

    monkeypatch.setattr(SlurmClient, "start_step", start_step)
    monkeypatch.setattr(dataservice, "batch_host", lambda env: "127.0.0.1")
    monkeypatch.setattr(dataservice, "job_nodes", lambda env: ("127.0.0.1",))
    monkeypatch.setattr(dataservice, "plan_ports", lambda body, env: dataservice.ServicePorts(dispatcher,
                                                                                            (first, second)))
    monkeypatch.setattr(dataservice, "STOP_GRACE", 0.5)
    monkeypatch.setattr(servicesizer, "POLL", 0.05)
    job = JobBody(tmp_path / "run", nodes=2, tasks_per_node=1, data_service=DataService(1, auto=True))
    env = {**JOB, "SLURM_JOB_CPUS_PER_NODE": "2(x2)"}
    run_dir = job.run_dir

    def epoch(number: int, share: float) -> None:
        import time

        now = time.time()
        epochs = [{"epoch": number, "input_share": share, "began": now, "ended": now + 0.001}]
        write_json_atomically(ranks_path(run_dir, 1), {"totals": {}, "epochs": epochs})

    request.addfinalizer(lambda: [server.close() for server in servers])
    with serving_data(job, env, 1, under_slurm=True) as step_env:
        assert step_env["HPC_TRAIN_DATA_SERVICE_WORKERS"] == "1"
        assert started[1][0][-4:-2] == ["--ports", str(first)] and "--ntasks=1" in started[1][0]
        epoch(1, 0.34)
        assert added.wait(30)
        assert started[2][0][-4:-2] == ["--ports", str(second)]
        assert wait_for(lambda: read_service(run_dir).get("auto", {}).get("workers") == 2)
        assert read_service(run_dir)["workers"] == [first, second]  # status's line names both
        epoch(2, 0.05)
        assert wait_for(lambda: read_service(run_dir)["auto"]["before"] is None)
    err = capsys.readouterr().err
    assert "hpc-train: data workers 1 -> 2: input 34% of the last epoch\n" in err
    assert "hpc-train: data workers stay at 2: input 5% of the last epoch (34% before worker 2): under 10%\n" in err
    assert err.count("hpc-train: data workers") == 2
    assert all(process.poll() is not None for _, process in started)

    with serving_data(job, {**env, "SLURM_RESTART_COUNT": "1"}, 2, under_slurm=True) as step_env:
        assert step_env["HPC_TRAIN_DATA_SERVICE_WORKERS"] == "2"  # the size reached, from the start
    workers_step = started[-1][0]
    assert "--ntasks=2" in workers_step and workers_step[-4:-2] == ["--ports", f"{first},{second}"]
