"""Check a cluster before you wait in its queue: Slurm, accounting, GPUs, and a tiny 2-node step.

    hpc-train doctor [--partition P] [--data-dir DIR] [--nodes 2] [--ps-partition CPU_PARTITION] [--data-partition P]
                     [--container IMAGE]

One line per check, with the fix when it fails; exit 0 only when all pass.
The step (one task per node) imports TensorFlow on each node and compares its
version with this machine's, meets the other tasks on the ports the bootstrap
would give a training job, and reads --data-dir there. Then each task listens on
its port and this host tries to connect (warn when it can: nothing guards a job's
ports from hosts outside the job), and the nodes' locked-memory and open-files
limits are judged against multi-node NCCL over InfiniBand (warn when low).
"""

from __future__ import annotations

import argparse
import os


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--partition", "-p", default=None, help="the partition to check (default: the default one); a,b: each")
    parser.add_argument("--data-dir", default=None, metavar="DIR", help="a data folder the nodes must read")
    parser.add_argument("--ps-partition", default=None, metavar="P",
                        help="also check the partition a parameter-server job's chief and ps go to (submit "
                             "--ps-partition: one heterogeneous job)")
    parser.add_argument("--data-partition", default=None, metavar="P",
                        help="also check the partition a job's tf.data service workers would go to (submit "
                             "--data-partition)")
    parser.add_argument("--nodes", type=int, default=2, metavar="N", help="nodes in the test step (default 2)")
    from hpc_train.cli.joboptions import add_container_arguments

    add_container_arguments(parser, "run the test step's ranks in this image, as a job's (docs/containers.md): is "
                                    "the runtime on the nodes, and does a rank start inside?")
    parser.add_argument("--wait", type=int, default=120, metavar="S",
                        help="seconds the test step may wait for nodes (srun --immediate; default 120)")


def run(args: argparse.Namespace) -> int:
    import os

    from hpc_train.doctor.checks import Check, accounting, data_partition, ps_partition, slurm_partition
    from hpc_train.errors import HpcTrainError
    from hpc_train.slurm.client import SlurmClient

    if args.nodes < 1 or args.wait < 1:
        raise HpcTrainError(f"--nodes {args.nodes} --wait {args.wait}: both must be 1 or more")
    slurm = SlurmClient.local(os.environ)
    # `--partition a,b` (submit's list): each checked, every one known first (no Slurm, or an unknown: one line).
    partitions = [slurm_partition(slurm, name) for name in (args.partition.split(",") if args.partition else [None])]
    checks = [*(Check("slurm", True, f"answers; partition {partition.name}{' (default)' if partition.default else ''}"
                      f": {partition.total_nodes} nodes") for partition in partitions),
              accounting(slurm),
              *(Check("gpus", True, f"{max(partition.node_gpus, default=0)} per node (GRES)"
                      f"{f' on {partition.name}' if len(partitions) > 1 else ''}" if any(partition.node_gpus)
                      else f"none declared (CPU nodes){f' on {partition.name}' if len(partitions) > 1 else ''}")
                for partition in partitions)]
    if args.ps_partition is not None:
        checks.append(ps_partition(slurm, args.ps_partition, slurm.config_value("AccountingStorageTRES")))
    if args.data_partition is not None:
        checks.append(data_partition(slurm, args.data_partition))
    for check in checks:
        print(check.line(), flush=True)
    container = image(args)
    results = [result for partition in partitions for result in step_results(args, slurm, partition, container)]
    return 0 if all(check.passed for check in [*checks, *results]) else 1


def step_results(args: argparse.Namespace, slurm, partition, container) -> list:  # (..., Partition, Container|None)
    """The test step on one partition, its checks printed as they come and returned."""
    import os
    from importlib import metadata

    from hpc_train.doctor.checks import Check, run_step, step_checks
    from hpc_train.doctor.container import container_check, contained_command

    nodes = min(args.nodes, partition.total_nodes)
    print(f"...   step: {nodes} task(s), one per node, on {partition.name} (waits up to {args.wait} s for nodes)",
          flush=True)
    reports, failure = run_step(slurm, partition, nodes, args.data_dir, args.wait, container and (
        lambda command: contained_command(container, command, args.data_dir, os.environ)))
    try:  # (an image's TensorFlow is its own: not compared with this machine's)
        local = None if container else metadata.version("tensorflow")
    except metadata.PackageNotFoundError:
        local = None
    results = step_checks(reports, nodes, local, args.data_dir)
    if failure and not reports:
        results = [Check("step", False, f"srun failed on {partition.name} ({failure})", "see sinfo; is the "
                         "partition up and are nodes free?")]
    results = [container_check(container, reports, nodes, failure), *results] if container else results
    for check in results:
        print(check.line(), flush=True)
    return results


def image(args: argparse.Namespace):  # -> Container | None (the CLI's imports stay inside run)
    """--container's image and its runtime, the image checked there as submit checks it (one line when not)."""
    if args.container is None:
        return None
    from hpc_train.cli.joboptions import image_path
    from hpc_train.container.runtime import ContainerError, choose_runtime, image_problem

    path = image_path(args.container)
    container = choose_runtime(path, args.container_runtime, os.path.isdir(path))
    problem = image_problem(container, os.path.exists(path))
    if problem:
        raise ContainerError(problem)
    return container
