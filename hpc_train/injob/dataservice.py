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

`--data-workers auto`: the workers' step starts with the size data_service.json keeps (1 the first time), and a
ServiceSizer (servicesizer.py) adds workers while the ranks run, each one more `srun --overlap` step of one task
(`one_worker`) on the next of the job's nodes, at the next port of the window, watched by a guard of its own.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hpc_train.bootstrap.nodelist import expand_nodelist
from hpc_train.data_service.autosize import Sizing, worker_limit
from hpc_train.bootstrap.slurm_env import SERVICE_PORTS
from hpc_train.data_service.endpoints import ServicePorts, service_ports, window
from hpc_train.data_service.environment import WORK_DIR, ServiceEnv, address, job_name
from hpc_train.data_service.placement import held, misfit
from hpc_train.injob.jobline import JobBody
from hpc_train.injob.servicecomponent import het_group, service_nodes, srun_environ
from hpc_train.injob.serviceguard import DISPATCHER, WorkerGuard
from hpc_train.injob.servicesizer import ServiceSizer
from hpc_train.injob.sizing import attempt_size
from hpc_train.runs.goodput import ledger_on
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
    return service_ports(ports, tasks, body.data_service.most, body.tasks_per_node)


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


def worker_nodes(workers: int, env: Mapping[str, str]) -> int:
    """The nodes `workers` spread over: one each, as far as the service's own component's nodes go, else the job's
    (the first component's) (pure)."""
    if service_nodes(env):
        return max(1, min(workers, len(service_nodes(env))))
    count = env.get("SLURM_JOB_NUM_NODES_HET_GROUP_0") or env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES")
    return max(1, min(workers, int(count) if count and count.isdigit() else 1))


def starting_workers(body: JobBody, env: Mapping[str, str]) -> Sizing | None:
    """`auto`'s sizing as this attempt starts: the size an earlier attempt reached (data_service.json), within the
    job's limit; None for a service of a fixed size."""
    service = body.data_service
    if service is None or not service.auto:
        return None
    limit = worker_limit(env, step_tasks(body, env), service.cpus, service.most)
    return Sizing.of_record(read_service(body.run_dir).get("auto"), limit)


def server_steps(body: JobBody, env: Mapping[str, str], ports: ServicePorts, host: str,
                 python: str, workers: int | None = None) -> tuple[list[str], list[str]]:
    """srun's arguments of the dispatcher's step and of the workers' step, `workers` of them (default: the
    service's) (pure)."""
    assert body.data_service is not None
    service = body.data_service
    workers_count = service.workers if workers is None else workers
    run_dir = body.run_dir.resolve()
    logs = run_dir / "logs"
    common = [*het_group(env), "--overlap", "--quiet", "--kill-on-bad-exit=0", "--open-mode=append"]
    stop = ["--stop-file", str(run_dir / STOP_FILE)]
    dispatcher = [*common, f"--job-name={DISPATCHER_STEP}", "--nodes=1", "--ntasks=1", f"--nodelist={host}",
                  f"--output={logs}/data-dispatcher.out",
                  python, "-m", SERVERS, "dispatcher", "--port", str(ports.dispatcher),
                  "--work-dir", str(run_dir / WORK_DIR), *stop]
    workers = [*common, f"--job-name={WORKERS_STEP}", f"--nodes={worker_nodes(workers_count, env)}",
               f"--ntasks={workers_count}",
               f"--cpus-per-task={service.cpus}", "--distribution=cyclic", f"--output={logs}/data-worker-%t.out",
               python, "-m", SERVERS, "worker", "--dispatcher", address(host, ports.dispatcher),
               "--ports", ",".join(map(str, ports.workers[:workers_count])), *stop]
    return dispatcher, workers


def one_worker(body: JobBody, env: Mapping[str, str], ports: ServicePorts, host: str, node: str, index: int,
               python: str) -> list[str]:
    """srun's arguments of a step of one worker, the service's `index`th (0-based: its port, its log), on `node`:
    `auto`'s added worker (pure)."""
    assert body.data_service is not None
    run_dir = body.run_dir.resolve()
    return [*het_group(env), "--overlap", "--quiet", "--kill-on-bad-exit=0", "--open-mode=append", f"--job-name={WORKERS_STEP}",
            "--nodes=1", "--ntasks=1", f"--nodelist={node}", f"--cpus-per-task={body.data_service.cpus}",
            f"--output={run_dir / 'logs'}/data-worker-{index}.out",
            python, "-m", SERVERS, "worker", "--dispatcher", address(host, ports.dispatcher),
            "--ports", str(ports.workers[index]), "--stop-file", str(run_dir / STOP_FILE)]


def service_slurm(env: Mapping[str, str]) -> SlurmClient:
    """The Slurm client that starts the service's steps: srun's variables without the job's SLURM_NTASKS_PER_NODE,
    which srun would take for the step's own and then say it ignores ("can't honor --ntasks-per-node set to 2 which
    doesn't match the requested tasks 3") in the job's log: each step says its tasks itself."""
    return SlurmClient.local({name: value for name, value in srun_environ(env).items()
                              if name != "SLURM_NTASKS_PER_NODE"})


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
    guards: list[WorkerGuard] = []
    sizer: ServiceSizer | None = None
    stop_file = body.run_dir / STOP_FILE
    stop_file.unlink(missing_ok=True)  # (a previous attempt's)
    try:
        try:
            sizing = starting_workers(body, env)
            count = sizing.workers if sizing is not None else body.data_service.workers
            ready = start(body, env, attempt, steps, count)
        except Exception as error:  # noqa: BLE001 - a bug or a Slurm that refuses: the job goes on without it
            _say(f"warning: no data service ({type(error).__name__}: {error}); the ranks read their input themselves")
            ready = None
        if ready is None:
            stop(steps, stop_file)  # (what did start: not left running beside ranks that do not use it)
            note_service(body.run_dir, state="not started", attempt=attempt)
        else:  # a dispatcher's or workers' step that ends while the ranks run is started again (serviceguard.py)
            guards.append(WorkerGuard(steps, 0, lambda: dispatcher_again(body, env), _say, step=DISPATCHER).start())
            guards.append(WorkerGuard(steps, 1, lambda: workers_again(body, env, count), _say).start())
            sizer = sizing_itself(body, env, attempt, sizing, steps, guards)
        yield {**env, **ready.environ()} if ready else dict(env)
    finally:
        if sizer is not None:
            sizer.stop()
        for guard in guards:
            guard.stop()
        stop(steps, stop_file)
        if guards:
            note_service(body.run_dir, state="stopped")


def sizing_itself(body: JobBody, env: Mapping[str, str], attempt: int, sizing: Sizing | None, steps: list[Any],
                  guards: list[WorkerGuard]) -> ServiceSizer | None:
    """`auto`'s thread, started (servicesizer.py); None for a service of a fixed size, or without the ledger it
    reads (one line)."""
    if sizing is None:
        return None
    if not ledger_on(env):
        _say(f"data workers stay at {sizing.workers}: --data-workers auto reads the ledger's input share, and "
             "HPC_TRAIN_LEDGER turns the ledger off")
        return None
    sizer = ServiceSizer(body.run_dir, attempt, sizing,
                         lambda index: add_worker(body, env, steps, guards, index, sizer.stopping), _say)
    return sizer.start()


def add_worker(body: JobBody, env: Mapping[str, str], steps: list[Any], guards: list[WorkerGuard],
               index: int, stopping: threading.Event | None = None) -> bool:
    """`auto`'s added worker, the service's `index`th: its step started (appended to `steps`, a guard of its own
    in `guards`) on the next of the job's nodes; whether it listens (one warning line when not). Once `stopping`
    (the service ends with the ranks' step), a worker still starting is given up on without a word or a guard."""
    ending = stopping.is_set if stopping is not None else (lambda: False)
    ports, host, nodes = plan_ports(body, env), dispatcher_host(env), job_nodes(env)
    node = nodes[index % len(nodes)]
    arguments = one_worker(body, env, ports, host, node, index, sys.executable)
    slurm = service_slurm(env)
    try:
        steps.append(slurm.start_step(arguments))
    except Exception as error:  # noqa: BLE001 - srun refused: the service runs on with the workers it has
        _say(f"warning: data worker {index + 1} could not be started ({type(error).__name__}: {error})")
        return False
    at = len(steps) - 1
    if not reachable([node], ports.workers[index], START_TIMEOUT, lambda: steps[at].poll() is None and not ending()):
        if ending():
            return False
        _say(f"warning: data worker {index + 1} did not start on {node}:{ports.workers[index]} (its log: "
             f"{body.run_dir / 'logs'}/data-worker-{index}.out); the service runs on with {index}")
        return False
    if ending():
        return False
    guards.append(WorkerGuard(steps, at, lambda: counted_restart(body, slurm.start_step(arguments)), _say).start())
    note_service(body.run_dir, workers=list(ports.workers[:index + 1]))
    return True


def dispatcher_again(body: JobBody, env: Mapping[str, str]) -> Any:
    """A new srun of the dispatcher's step, as the first: the same port, the same journal (it restores from it)."""
    dispatcher, _ = server_steps(body, env, plan_ports(body, env), dispatcher_host(env), sys.executable)
    return service_slurm(env).start_step(dispatcher)


def workers_again(body: JobBody, env: Mapping[str, str], count: int) -> Any:
    """A new srun of the workers' step, as the first (the guard's restart): the same ports, the same logs."""
    _, workers = server_steps(body, env, plan_ports(body, env), dispatcher_host(env), sys.executable, count)
    return counted_restart(body, service_slurm(env).start_step(workers))


def counted_restart(body: JobBody, process: Any) -> Any:
    """`process`, a workers' step started again, counted in data_service.json (status says how many times)."""
    restarts = read_service(body.run_dir).get("restarts", 0)
    note_service(body.run_dir, restarts=(restarts if isinstance(restarts, int) else 0) + 1)
    return process


def start(body: JobBody, env: Mapping[str, str], attempt: int, steps: list[Any],
          count: int | None = None) -> ServiceEnv | None:
    """Start the dispatcher, then `count` workers (default: the service's; their sruns appended to `steps`); what
    the ranks read, or None."""
    assert body.data_service is not None
    count = body.data_service.workers if count is None else count
    try:
        ports = plan_ports(body, env)
    except Exception as error:  # noqa: BLE001 - a window without room: the job runs without the service
        _say(f"warning: no data service ({error}); the ranks read their input themselves")
        return None
    problem = None if service_nodes(env) else misfit(held(env) or [], count, body.data_service.cpus,
                                                     env.get("SLURM_CPUS_PER_TASK", ""))
    if problem:  # (srun would refuse the workers' step at once: said here, in words, before anything starts)
        _say(f"warning: no data service: {problem}; the ranks read their input themselves")
        return None
    host = dispatcher_host(env)
    (body.run_dir / "logs").mkdir(parents=True, exist_ok=True)
    dispatcher, workers = server_steps(body, env, ports, host, sys.executable, count)
    slurm = service_slurm(env)
    steps.append(slurm.start_step(dispatcher))
    if not reachable([host], ports.dispatcher, START_TIMEOUT, lambda: steps[0].poll() is None):
        _say(f"warning: the data service's dispatcher did not start on {host}:{ports.dispatcher} (its log: "
             f"{body.run_dir / 'logs' / 'data-dispatcher.out'}); the ranks read their input themselves")
        return None
    steps.append(slurm.start_step(workers))
    running = ports.workers[:count]
    # Every worker listening before the ranks start: ranks given a service without workers would wait on it for ever.
    waiting = [port for port in running
               if not reachable(job_nodes(env), port, START_TIMEOUT, lambda: steps[1].poll() is None)]
    if waiting:
        _say(f"warning: the data service's workers did not all start (none on port(s) {','.join(map(str, waiting))}; "
             f"their logs: {body.run_dir / 'logs'}/data-worker-*.out); the ranks read their input themselves")
        return None
    service = ServiceEnv(address(host, ports.dispatcher), job_name(env.get("SLURM_JOB_ID", "local"), attempt,
                                                                   os.getpid()), workers=count)
    _say(f"data service at {service.address} (journal in {Path(body.run_dir) / WORK_DIR}), "
         f"{count} worker(s) on ports {','.join(map(str, running))}"
         + (f" (auto: up to {len(ports.workers)})" if body.data_service.auto else ""))
    note_service(body.run_dir, state="running", attempt=attempt, address=service.address, workers=list(running),
                 restarts=0, partition=body.data_service.partition, nodes=list(job_nodes(env)))
    return service
