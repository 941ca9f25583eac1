"""The job's tf.data service, started by the job body around the step and ended with it (docs/data_service.md).

Beside the ranks, on the job's own nodes: the dispatcher is one `srun --overlap` step on the batch node (fault-
tolerant mode, its journal in the run folder's data_service/, which the next attempt's dispatcher reads again), the
N workers one more `srun --overlap` step spread over the job's nodes (`--cpus-per-task C`). `--overlap` lets them
share the nodes with the ranks' own step. Their ports are the top of the job's port window (data_service/endpoints.py).
Once the dispatcher takes connections, every rank gets its address, the attempt's job name and the processing
mode in its environment (data_service/environment.py); after the step both steps are ended (the run folder's stop
file, STOP_FILE: the servers exit 0), and the job's end ends whatever is left of them.

A service that does not start costs the job nothing but its speed: one warning line, and the ranks read their
input themselves, in its exact order.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hpc_train.bootstrap.nodelist import expand_nodelist
from hpc_train.bootstrap.slurm_env import SERVICE_PORTS
from hpc_train.data_service.endpoints import ServicePorts, service_ports, window
from hpc_train.data_service.environment import WORK_DIR, ServiceEnv, address, job_name
from hpc_train.injob.jobline import JobBody
from hpc_train.injob.servicecomponent import het_group, service_nodes, srun_environ
from hpc_train.injob.serviceguard import WorkerGuard
from hpc_train.injob.sizing import attempt_size
from hpc_train.runs.servicerecord import DISPATCHER_STEP, WORKERS_STEP, note_service, read_service
from hpc_train.slurm.client import SlurmClient
from hpc_train.spec.data_service import DataService
from hpc_train.version import PREFIX

SERVERS = "hpc_train.data_service.servers"
START_TIMEOUT = 180.0  # seconds for the dispatcher to take connections (TensorFlow's import included)
STOP_GRACE = 10.0
STOP_FILE = "data_service.stop"  # in the run folder: the servers end once it is there (servers.py)


def start_words(body: JobBody) -> str:
    """The start line's words for the service (pure): that the job trades the exact order of examples for it."""
    if body.data_service is None:
        return ""
    return f"; input through the {body.data_service.words()} (example order not exact)"


def step_tasks(body: JobBody, env: Mapping[str, str]) -> int:
    """The ranks of this attempt's step, as the bootstrap counts them for the port window (pure)."""
    sized = attempt_size(body.node_range, body.tasks_per_node, env)
    if sized:
        return sized[0] * body.tasks_per_node
    components = int(env.get("SLURM_HET_SIZE", "1") or 1)
    if components > 1:
        return sum(int(env.get(f"SLURM_NTASKS_HET_GROUP_{index}", "0") or 0) for index in range(components))
    count = env.get("SLURM_NTASKS", "")
    return int(count) if count.isdigit() else body.nodes * body.tasks_per_node


def plan_ports(body: JobBody, env: Mapping[str, str]) -> ServicePorts:
    """The service's ports in this attempt's window (pure)."""
    assert body.data_service is not None
    job_id = env.get("SLURM_JOB_ID", "")
    base = env.get("HPC_TRAIN_PORT_BASE", "")
    tasks = step_tasks(body, env)
    ports = window(int(job_id) if job_id.isdigit() else None, tasks, body.tasks_per_node,
                   int(base) if base.isdigit() else None, above=body.data_service.processes)
    return service_ports(ports, tasks, body.data_service.workers, body.tasks_per_node)


def window_environ(body: JobBody) -> dict[str, str]:
    """What the ranks need to compute the job's window as the body and the site kit do (pure): the service's ports
    above theirs. Set whether or not the service starts: the window is the job's, not the attempt's."""
    return {SERVICE_PORTS: str(body.data_service.processes)} if body.data_service is not None else {}


def dispatcher_host(env: Mapping[str, str]) -> str:
    """The dispatcher's node: the first of the service's own component (servicecomponent.py), else the batch node."""
    own = service_nodes(env)
    return own[0] if own else batch_host(env)


def batch_host(env: Mapping[str, str]) -> str:
    """The node this job body runs on, as the job's node list names it."""
    nodes = env.get("SLURM_JOB_NODELIST", "")
    named = env.get("SLURMD_NODENAME", "")
    listed = expand_nodelist("SLURM_JOB_NODELIST", nodes) if nodes else ()
    return named if named and (not listed or named in listed) else (listed[0] if listed else socket.gethostname())


def worker_nodes(service: DataService, env: Mapping[str, str]) -> int:
    """The nodes the workers spread over: one each, as far as the service's own component's nodes go, else the job's
    (the first component's) (pure)."""
    if service_nodes(env):
        return max(1, min(service.workers, len(service_nodes(env))))
    count = env.get("SLURM_JOB_NUM_NODES_HET_GROUP_0") or env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES")
    return max(1, min(service.workers, int(count) if count and count.isdigit() else 1))


def server_steps(body: JobBody, env: Mapping[str, str], ports: ServicePorts, host: str,
                 python: str) -> tuple[list[str], list[str]]:
    """srun's arguments of the dispatcher's step and of the workers' step (pure)."""
    assert body.data_service is not None
    service = body.data_service
    run_dir = body.run_dir.resolve()
    logs = run_dir / "logs"
    common = [*het_group(env), "--overlap", "--quiet", "--kill-on-bad-exit=0", "--open-mode=append"]
    stop = ["--stop-file", str(run_dir / STOP_FILE)]
    dispatcher = [*common, f"--job-name={DISPATCHER_STEP}", "--nodes=1", "--ntasks=1", f"--nodelist={host}",
                  f"--output={logs}/data-dispatcher.out",
                  python, "-m", SERVERS, "dispatcher", "--port", str(ports.dispatcher),
                  "--work-dir", str(run_dir / WORK_DIR), *stop]
    workers = [*common, f"--job-name={WORKERS_STEP}", f"--nodes={worker_nodes(service, env)}",
               f"--ntasks={service.workers}",
               f"--cpus-per-task={service.cpus}", "--distribution=cyclic", f"--output={logs}/data-worker-%t.out",
               python, "-m", SERVERS, "worker", "--dispatcher", address(host, ports.dispatcher),
               "--ports", ",".join(map(str, ports.workers)), *stop]
    return dispatcher, workers


def reachable(hosts: Sequence[str], port: int, seconds: float, alive: Any) -> bool:
    """Whether `port` takes a connection on one of `hosts` within `seconds`, tried while `alive()` (its srun runs)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and alive():
        for host in hosts:
            try:
                with socket.create_connection((host, port), timeout=2.0):
                    return True
            except OSError:
                pass
        time.sleep(0.5)  # (polling a port that is not open yet: nothing to wait on but the port itself)
    return False


def job_nodes(env: Mapping[str, str]) -> tuple[str, ...]:
    """The nodes where srun may have put a data worker: the service's own component's, else the job's."""
    if service_nodes(env):
        return service_nodes(env)
    nodes = env.get("SLURM_JOB_NODELIST", "")
    return expand_nodelist("SLURM_JOB_NODELIST", nodes) if nodes else (batch_host(env),)


def stop(steps: Sequence[Any], stop_file: Path) -> None:
    """End the service's steps: the stop file written, which the servers look for (they exit 0, and srun with them:
    srun passes few signals on, and a TERM would make it cancel the step and report killed tasks); SIGKILL to an
    srun still there after a grace (the job's end reaps what is left of its step)."""
    if not steps:
        return
    stop_file.touch()
    deadline = time.monotonic() + STOP_GRACE
    for process in steps:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001 - still running: killed
            process.kill()
            process.wait()


def _say(line: str) -> None:
    print(f"{PREFIX}: {line}", file=sys.stderr, flush=True)


@contextmanager
def serving_data(body: JobBody, env: Mapping[str, str], attempt: int, under_slurm: bool) -> Iterator[dict[str, str]]:
    """The step's environment with the job's data service running (the body's `env` itself when it has none, or
    when the service could not start: one warning line); the service ended after the step."""
    if body.data_service is None:
        yield dict(env)
        return
    if not under_slurm:
        _say("warning: the data service runs as Slurm steps, and this job runs without Slurm; its ranks read "
             "their input themselves")
        yield dict(env)
        return
    env = {**env, **window_environ(body)}
    steps: list[Any] = []
    guard: WorkerGuard | None = None
    stop_file = body.run_dir / STOP_FILE
    stop_file.unlink(missing_ok=True)  # (a previous attempt's)
    try:
        try:
            ready = start(body, env, attempt, steps)
        except Exception as error:  # noqa: BLE001 - a bug or a Slurm that refuses: the job goes on without it
            _say(f"warning: no data service ({type(error).__name__}: {error}); the ranks read their input themselves")
            ready = None
        if ready is None:
            stop(steps, stop_file)  # (what did start: not left running beside ranks that do not use it)
            note_service(body.run_dir, state="not started", attempt=attempt)
        else:  # a workers' step that ends while the ranks run is started again (serviceguard.py)
            guard = WorkerGuard(steps, 1, lambda: workers_again(body, env), _say).start()
        yield {**env, **ready.environ()} if ready else dict(env)
    finally:
        if guard is not None:
            guard.stop()
        stop(steps, stop_file)
        if guard is not None:
            note_service(body.run_dir, state="stopped")


def workers_again(body: JobBody, env: Mapping[str, str]) -> Any:
    """A new srun of the workers' step, as the first (the guard's restart): the same ports, the same logs."""
    _, workers = server_steps(body, env, plan_ports(body, env), dispatcher_host(env), sys.executable)
    process = SlurmClient.local(srun_environ(env)).start_step(workers)
    restarts = read_service(body.run_dir).get("restarts", 0)
    note_service(body.run_dir, restarts=(restarts if isinstance(restarts, int) else 0) + 1)
    return process


def start(body: JobBody, env: Mapping[str, str], attempt: int, steps: list[Any]) -> ServiceEnv | None:
    """Start the dispatcher, then the workers (their sruns appended to `steps`); what the ranks read, or None."""
    try:
        ports = plan_ports(body, env)
    except Exception as error:  # noqa: BLE001 - a window without room: the job runs without the service
        _say(f"warning: no data service ({error}); the ranks read their input themselves")
        return None
    host = dispatcher_host(env)
    (body.run_dir / "logs").mkdir(parents=True, exist_ok=True)
    dispatcher, workers = server_steps(body, env, ports, host, sys.executable)
    slurm = SlurmClient.local(srun_environ(env))
    steps.append(slurm.start_step(dispatcher))
    if not reachable([host], ports.dispatcher, START_TIMEOUT, lambda: steps[0].poll() is None):
        _say(f"warning: the data service's dispatcher did not start on {host}:{ports.dispatcher} (its log: "
             f"{body.run_dir / 'logs' / 'data-dispatcher.out'}); the ranks read their input themselves")
        return None
    steps.append(slurm.start_step(workers))
    # Every worker listening before the ranks start: ranks given a service without workers would wait on it for ever.
    waiting = [port for port in ports.workers
               if not reachable(job_nodes(env), port, START_TIMEOUT, lambda: steps[1].poll() is None)]
    if waiting:
        _say(f"warning: the data service's workers did not all start (none on port(s) {','.join(map(str, waiting))}; "
             f"their logs: {body.run_dir / 'logs'}/data-worker-*.out); the ranks read their input themselves")
        return None
    service = ServiceEnv(address(host, ports.dispatcher), job_name(env.get("SLURM_JOB_ID", "local"), attempt,
                                                                   os.getpid()), workers=body.data_service.workers)
    _say(f"data service at {service.address} (journal in {Path(body.run_dir) / WORK_DIR}), "
         f"{body.data_service.workers} worker(s) on ports {','.join(map(str, ports.workers))}")
    note_service(body.run_dir, state="running", attempt=attempt, address=service.address, workers=list(ports.workers),
                 restarts=0, partition=body.data_service.partition, nodes=list(job_nodes(env)))
    return service
