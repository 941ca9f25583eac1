"""One rank of `hpc-train doctor`'s test step, run on a compute node: what a training rank would need there.

It imports TensorFlow (and says which version, and the precision `auto` picks
on this node's CPU and GPUs), builds its TF_CONFIG from the
step as the trainer does, meets the other ranks on the very ports the
bootstrap gives them (the trainer's start-up barrier), and checks that the data
folder is readable. Then it listens on its port as TensorFlow's server would
(all addresses), says so (`HPC_TRAIN_DOCTOR_LISTENING host:port`) for the login
node to try from outside the job, and reads the limits a task gets (locked
memory, open files). It prints one line, `HPC_TRAIN_DOCTOR {json}`, and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from typing import Any

MARK = "HPC_TRAIN_DOCTOR "
LISTENING = "HPC_TRAIN_DOCTOR_LISTENING "


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hpc_train.doctor.step")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--listen-seconds", type=float, default=8.0,
                        help="how long the port stays open for the login node's try (0: not at all)")
    args = parser.parse_args(argv)
    if os.environ.get("HPC_TRAIN_CONTAINER"):  # in an image (doctor --container): checked as a job's rank is
        from hpc_train.container.inside import enter

        if problem := enter(os.environ):
            print(problem, file=sys.stderr, flush=True)
            return 2
    report: dict[str, Any] = {"rank": os.environ.get("SLURM_PROCID", "?"),
                              "node": os.environ.get("SLURMD_NODENAME", socket.gethostname()),
                              "container": os.environ.get("HPC_TRAIN_CONTAINER")}
    report.update(_tensorflow())
    report.update(_peers(args.timeout))
    if "address" in report and args.listen_seconds > 0:
        _listen(report["address"], args.listen_seconds)
    report.update(_limits())
    if args.data_dir:
        report.update(_data(args.data_dir))
    print(MARK + json.dumps(report), flush=True)
    return 0


def _tensorflow() -> dict[str, Any]:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:  # TensorFlow alone, at tfimport's cost (not Keras 3's whole import): tf-keras is judged by its own check
        from hpc_train.bootstrap.tfimport import tensorflow

        tf = tensorflow(with_keras=False)
    except Exception as error:  # any failure to import is the finding
        return {"tensorflow_error": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"}
    from hpc_train.bootstrap.keras import installed_versions
    from hpc_train.training.precision import AUTO, this_rank

    chosen = this_rank(AUTO)  # what `precision: auto` trains in on this node: its CPU's flags, its GPUs
    return {"tensorflow": tf.__version__, "python": sys.executable, "tf_keras": installed_versions()["tf-keras"],
            "precision": {"policy": chosen.policy, "why": chosen.why}}


def _peers(timeout: float) -> dict[str, Any]:
    from hpc_train.bootstrap import BootstrapOptions, apply_to_environ
    from hpc_train.errors import HpcTrainError
    from hpc_train.training.rank import parse_tf_config
    from hpc_train.runs.secret import job_secret
    from hpc_train.training.rendezvous import meet

    try:
        layout = apply_to_environ(os.environ, BootstrapOptions())
        meet(parse_tf_config(os.environ["TF_CONFIG"], "multiworker"), timeout, job_secret(os.environ))
    except HpcTrainError as error:
        return {"peers_error": str(error)}
    return {"address": f"{layout.me.host}:{layout.me.port}"}


def _listen(address: str, seconds: float) -> None:
    """Listen on this rank's port on every address, as TensorFlow's gRPC server does, until one connection came
    (the login node's) or `seconds` passed (a firewall dropped it)."""
    port = int(address.rpartition(":")[2])
    try:
        server = socket.create_server(("", port))
    except OSError:
        return  # taken since the meeting: the login node's try then says refused
    with server:
        print(LISTENING + address, flush=True)
        server.settimeout(seconds)
        try:
            server.accept()[0].close()
        except OSError:
            pass


def _limits() -> dict[str, Any]:
    """The soft limits a task of a job gets here (-1: unlimited): what NCCL over InfiniBand runs under."""
    import resource

    def soft(which: int) -> int:
        value = resource.getrlimit(which)[0]
        return -1 if value == resource.RLIM_INFINITY else value

    return {"memlock": soft(resource.RLIMIT_MEMLOCK), "nofile": soft(resource.RLIMIT_NOFILE)}


def _data(folder: str) -> dict[str, Any]:
    try:
        names = os.listdir(folder)
    except OSError as error:
        return {"data_error": f"{folder}: {error.strerror}"}
    unreadable = [name for name in names if not os.access(os.path.join(folder, name), os.R_OK)]
    if unreadable:
        return {"data_error": f"{folder}: cannot read {', '.join(sorted(unreadable)[:3])}"}
    return {"data": f"{folder}: {len(names)} entries"}


if __name__ == "__main__":
    sys.exit(main())
