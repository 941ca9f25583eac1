"""The data service's processes: `python -m hpc_train.data_service.servers dispatcher|worker ...`, each one
TensorFlow server that runs until it is signalled (the job body's srun step, or the job's end, ends it).

- the dispatcher: fault-tolerant mode, its journal in the run folder (`--work-dir`), so that a dispatcher started
  again (the next attempt's) finds what it had registered;
- a worker: registers with the dispatcher and runs the pipelines it is given; its port is its own, named by
  `--ports` and its place among the step's workers (SLURM_PROCID), its host the node it runs on.

Each samples its own CPU use into the run folder while it serves (utilization/service.py), for `report`.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
from collections.abc import Mapping, Sequence

from hpc_train.bootstrap.tfimport import tensorflow
from hpc_train.utilization.service import sample_service
from hpc_train.version import PREFIX

# SIGTERM: the job's end; SIGINT: by hand. (The body ends the service with its stop file instead: srun passes few
# signals on to its tasks, and makes a TERM the step's cancel; USR1 and USR2 are Slurm's time-limit warnings.)
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}
STOP_POLL = 0.5  # seconds between looks for the stop file (a shared folder: no event reaches another node)
WARNINGS = (signal.SIGUSR1, signal.SIGUSR2)  # ignored: a warned job's ranks still read their input while they save
# A worker lost costs the ranks a stall until the dispatcher gives its share to the others: the dispatcher gives up
# on a worker after WORKER_TIMEOUT_MS without a heartbeat, and the workers beat every HEARTBEAT_MS (TensorFlow's own
# defaults are minutes apart: a lost worker would hold the ranks that long).
HEARTBEAT_MS = 1000
WORKER_TIMEOUT_MS = 10_000


def worker_port(ports: Sequence[int], env: Mapping[str, str]) -> int:
    """This worker's port: the one at its place in the step (SLURM_PROCID; 0 outside a step) (pure)."""
    place = int(env.get("SLURM_PROCID", "0") or 0)
    if not 0 <= place < len(ports):
        raise ValueError(f"data worker {place} of a step given {len(ports)} port(s)")
    return ports[place]


def host_name(env: Mapping[str, str]) -> str:
    """The node this process runs on, as the job's node list names it (the ranks' TF_CONFIG names hosts so)."""
    return env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def serve_dispatcher(port: int, work_dir: str, stop_file: str | None = None) -> None:
    tf = tensorflow(with_keras=False)  # (a server runs no model: Keras' start-up spared)

    os.makedirs(work_dir, exist_ok=True)
    server = tf.data.experimental.service.DispatchServer(tf.data.experimental.service.DispatcherConfig(
        port=port, work_dir=work_dir, fault_tolerant_mode=True, worker_timeout_ms=WORKER_TIMEOUT_MS))
    print(f"{PREFIX}: data service dispatcher on {host_name(os.environ)}:{port}, journal in {work_dir}",
          file=sys.stderr, flush=True)
    sample_service(os.environ, "dispatcher", host_name(os.environ), port)  # its CPU use, for report
    until_told_to_stop(server, stop_file)


def serve_worker(dispatcher: str, port: int, stop_file: str | None = None) -> None:
    tf = tensorflow(with_keras=False)

    host = host_name(os.environ)
    server = tf.data.experimental.service.WorkerServer(tf.data.experimental.service.WorkerConfig(
        dispatcher_address=dispatcher.removeprefix("grpc://"), worker_address=f"{host}:{port}", port=port,
        heartbeat_interval_ms=HEARTBEAT_MS))
    print(f"{PREFIX}: data service worker on {host}:{port}, dispatcher {dispatcher}", file=sys.stderr, flush=True)
    sample_service(os.environ, "worker", host, port)
    until_told_to_stop(server, stop_file)


def until_told_to_stop(server: object, stop_file: str | None) -> None:
    """Serve (TensorFlow's threads) until one of STOP_SIGNALS or `stop_file` appears (the body's, after the step),
    then end at once, exit 0: an end asked for is the service's normal end, and srun has no failed task to report.
    The signals were blocked before TensorFlow started its threads (main), so that this thread alone takes them."""
    while signal.sigtimedwait(STOP_SIGNALS, STOP_POLL) is None:
        if stop_file and os.path.exists(stop_file):
            break
    print(f"{PREFIX}: data service {type(server).__name__} stopped", file=sys.stderr, flush=True)
    os._exit(0)  # (the servers keep no state to save: the dispatcher's journal is written as it goes)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hpc_train.data_service.servers")
    sub = parser.add_subparsers(dest="role", required=True)
    dispatcher = sub.add_parser("dispatcher")
    dispatcher.add_argument("--port", type=int, required=True)
    dispatcher.add_argument("--work-dir", required=True)
    worker = sub.add_parser("worker")
    worker.add_argument("--dispatcher", required=True, help="grpc://HOST:PORT")
    worker.add_argument("--ports", required=True, help="every worker's port, comma-separated, by SLURM_PROCID")
    for role in (dispatcher, worker):
        role.add_argument("--stop-file", default=None, help="end, exit 0, once this file exists")
    args = parser.parse_args(argv)
    # Blocked in every thread from here (TensorFlow's inherit the mask), taken by until_told_to_stop: a Python
    # handler would never run while the main thread waits in TensorFlow's C++.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    for warning in WARNINGS:
        signal.signal(warning, signal.SIG_IGN)
    if args.role == "dispatcher":
        serve_dispatcher(args.port, args.work_dir, args.stop_file)
    else:
        serve_worker(args.dispatcher, worker_port([int(port) for port in args.ports.split(",")], os.environ),
                     args.stop_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
