"""A real Slurm cluster on this machine, for tests and the demo (needs root).

    hpc-train cluster up [--nodes 'node[1-4]'] [--cpus N] [--dir DIR] [--gpus-per-node G] [--separate-hosts]
                         [--accounting] [--partition NAME:NODES[:GPUS] ...] [--site-firewall]
                         [--job-submit-lua FILE]
    export SLURM_CONF=/tmp/hpc-train-slurm/slurm.conf     # as `up` prints
    sbatch slurm/mnist_2node.sh
    hpc-train cluster status
    hpc-train cluster down

`up` installs slurm-wlm and munge with apt-get when they are missing, and is
idempotent; `down` stops only what `up` started. State, logs and slurm.conf
live in DIR (default /tmp/hpc-train-slurm); a system Slurm is left alone.
Without --port, `up` keeps the running cluster's port, else takes the first of 6917, 6927, ... that is
free here (with its nodes'); `status` and `down` read it back from DIR/slurm.conf.
With --partition (repeatable) the cluster has those partitions instead of one `debug` over --nodes: the first
is the default, the nodes are their union, and a partition's GPUS (default --gpus-per-node) is what each of its
nodes declares, e.g. `--partition cpu:node[1-2]:0 --partition gpu:node[3-4]:2` for heterogeneous jobs.
With --accounting, `up` also starts slurmdbd and a MariaDB of the cluster's own
(data in DIR/mariadb, on 127.0.0.1 only; slurmdbd and mariadb-server installed
when missing), so that sacct answers; `down` stops them too.
With --separate-hosts --site-firewall, slurm.conf's Prolog and Epilog run `hpc-train site firewall` (nftables
installed when missing), as an administrator would set them: each job's ports open to its own nodes alone
(docs/site-firewall.md); its lines go to DIR/log/site-firewall.log.
With --job-submit-lua FILE, slurmctld runs a site's job_submit.lua (copied to DIR/job_submit.lua) at each submit
and each update of a job, as the site's does: its policies (a running job's resize refused, say) tried here.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hpc_train.errors import HpcTrainError



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("up", "down", "status", "env"),
                        help="up: start (installing if needed); down: stop; status: show; env: print SLURM_CONF")
    parser.add_argument("--dir", default=None, metavar="DIR", help="state, logs and slurm.conf (default "
                                                                    "/tmp/hpc-train-slurm)")
    parser.add_argument("--nodes", default=None, metavar="LIST", help="node names, a Slurm node list "
                                                                      "(default node[1-4])")
    parser.add_argument("--partition", action="append", default=[], metavar="NAME:NODES[:GPUS]",
                        help="a partition of these nodes, each declaring GPUS GPUs (default --gpus-per-node); "
                             "repeatable, the first the default partition, the nodes their union (instead of "
                             "--nodes)")
    parser.add_argument("--cpus", type=int, default=None, metavar="N", help="CPUs per node (default max(4, cores))")
    parser.add_argument("--port", type=int, default=None, metavar="PORT",
                        help="slurmctld's port; the nodes take the next ones (default: the running cluster's, else the "
                             "first free of 6917, 6927, ...)")
    parser.add_argument("--gpus-per-node", type=int, default=None, metavar="G",
                        help="GPUs each node declares to Slurm (GRES, fake devices: jobs train on the CPU); "
                             "default 2, 0 for none")
    parser.add_argument("--separate-hosts", action="store_true",
                        help="each node in its own network namespace, its name resolving to its own address on a "
                             "bridge (10.250.<port mod 256>.0/24): as on a real cluster, localhost is not a peer")
    parser.add_argument("--site-firewall", action="store_true",
                        help="with --separate-hosts: the site kit as Slurm's Prolog and Epilog (hpc-train site "
                             "firewall; nftables installed when missing): a job's ports open to its own nodes alone")
    parser.add_argument("--job-submit-lua", metavar="FILE", default=None,
                        help="a site's job_submit.lua, run by slurmctld at each submit and update "
                             "(JobSubmitPlugins=lua): try a site's policies here")
    parser.add_argument("--accounting", action="store_true",
                        help="also slurmdbd (at PORT+300) and a MariaDB of the cluster's own (PORT+301, data in "
                             "DIR/mariadb), installed when missing: sacct answers, status and list read it")


def run(args: argparse.Namespace) -> int:
    from hpc_train.localslurm import control
    from hpc_train.localslurm.spec import LocalCluster

    settings = {key: value for key, value in (("directory", args.dir), ("cpus", args.cpus),
                                              ("controller_port", args.port),
                                              ("gpus_per_node", args.gpus_per_node)) if value is not None}
    if args.partition and args.nodes is not None:
        raise HpcTrainError("--nodes with --partition: the nodes are the partitions' union; give them in "
                            "--partition NAME:NODES[:GPUS] only")
    cluster = LocalCluster(nodes=args.nodes or "node[1-4]", separate_hosts=args.separate_hosts,
                           accounting=args.accounting, site_firewall=args.site_firewall,
                           job_submit_lua=Path(args.job_submit_lua) if args.job_submit_lua else None,
                           partitions=tuple(args.partition), **settings)
    if args.port is None:  # the port is the directory's: chosen free by `up`, read back by the others
        cluster = control.placed(cluster) if args.action == "up" else control.as_recorded(cluster)
    if args.action == "up":
        control.up(cluster)
    elif args.action == "down":
        control.down(cluster)
    elif args.action == "env":
        print(f"export SLURM_CONF={cluster.conf}")
    else:
        pids = control.status(cluster)
        for daemon, pid in pids.items():
            print(f"{daemon:<20} {'running, pid ' + str(pid) if pid else 'stopped'}")
        return 0 if all(pids.values()) else 3
    return 0
