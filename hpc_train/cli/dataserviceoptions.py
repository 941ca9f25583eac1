"""The options of a job's tf.data service (--data-workers, --data-partition, --data-cpus) for submit and render:
parsed, read with the YAML's `job: {data_service: ...}` into the request (spec/options.py), and checked where this
machine must answer (the partition, Slurm's word; the port window) before anything is queued."""

from __future__ import annotations

import argparse


def add_data_service_arguments(parser: argparse.ArgumentParser) -> None:
    """--data-workers, --data-partition, --data-cpus (and the YAML's job: data_service:, read into the same)."""
    parser.add_argument("--data-workers", default=None, metavar="N|auto",
                        help="run the input pipeline on TensorFlow's data service: a dispatcher and N data workers "
                             "started with the job, their ports in the job's window; trades the exact order of "
                             "examples for CPUs off the ranks' (docs/data_service.md; YAML: job: {data_service: "
                             "{workers: N}}); auto: one to start, more while the ranks wait on their input")
    parser.add_argument("--data-partition", default=None, metavar="P",
                        help="--data-workers: on CPU nodes of partition P, one more component of a heterogeneous "
                             "job (default: beside the ranks, on the job's own nodes)")
    parser.add_argument("--data-cpus", default=None, metavar="C", help="--data-workers: CPUs of each data worker "
                        "(default 1)")
    parser.set_defaults(data_service=None)  # the YAML's job: data_service: mapping (spec/options.with_section)


def check_partition(service) -> None:  # service: DataService
    """--data-partition P: one line when P does not exist (where Slurm answers; nothing to judge by elsewhere: a
    dry run's script still shows the component)."""
    import os

    from hpc_train.errors import HpcTrainError
    from hpc_train.login.partitions import read_partitions
    from hpc_train.login.preflight import data_partition_problems
    from hpc_train.slurm.client import SlurmClient
    from hpc_train.spec.data_service import DataServiceError

    slurm = SlurmClient.local(os.environ)
    try:
        problems = data_partition_problems(service, read_partitions(slurm)) if slurm.available("scontrol") else []
    except HpcTrainError:  # a Slurm that does not answer (render on a laptop): submit's preflight asks sbatch
        problems = []
    if problems:
        raise DataServiceError(problems[0])


def check_service_ports(spec) -> None:  # spec: JobRequest
    """A data service whose dispatcher and workers the job's port window cannot hold above its ranks, in one line
    (data_service/endpoints.py: the window, grown by the service's ports, without a job id: its size alone; past
    the derived range's 16,384 ports)."""
    if spec.data_service is None:
        return
    from hpc_train.bootstrap.ports import derived_window
    from hpc_train.data_service.endpoints import service_ports

    tasks, per_node = spec.num_tasks, max(group.tasks_per_node for group in spec.groups)
    service_ports(derived_window(0, tasks, per_node, spec.data_service.processes), tasks, spec.data_service.most,
                  per_node)
