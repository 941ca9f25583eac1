"""What a local cluster is, and the files that describe it to Slurm and munge (pure)."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from hpc_train.bootstrap.nodelist import expand_nodelist
from hpc_train.errors import HpcTrainError
from hpc_train.localslurm.netns import NetworkPlan, hosts_lines, plan_network
from hpc_train.localslurm.partitions import (PartitionSpec, check_partitions, compressed, node_gpus,
                                             parse_partition, partition_lines, union_nodes)

DEFAULT_DIR = Path("/tmp/hpc-train-slurm")
HOSTS_MARK = "# hpc-train local cluster"
# Below the bootstrap's derived TF ports (16384-32767), away from a system Slurm's 6817-6819.
DEFAULT_CONTROLLER_PORT = 6917
# A requeued job (the trainer requeues itself when warned) starts again after this long: Slurm's cred_expire,
# which it refuses below 5 s (a job credential must outlive a launch; launches here take milliseconds).
REQUEUE_WAIT_SECONDS = 5
MAX_GPUS_PER_NODE = 16
# Fake GPUs are character devices like /dev/null (major 1, minor 3): Slurm refuses plain files in gres.conf.
FAKE_GPU_DEVICE = (1, 3)
# With accounting, slurmdbd listens this far above slurmctld's port, and its MariaDB one further.
DBD_PORT_OFFSET = 300
ACCOUNTING_DAEMONS = ("mariadbd", "slurmdbd")


@dataclass(frozen=True)
class LocalCluster:
    """A one-machine Slurm cluster; every path and port derives from these fields."""

    directory: Path = DEFAULT_DIR
    nodes: str = "node[1-4]"
    cpus: int = max(4, os.cpu_count() or 1)
    controller_port: int = DEFAULT_CONTROLLER_PORT
    partition: str = "debug"
    # Each node in its own network namespace with its own address (netns.py); slurmd on one port everywhere.
    separate_hosts: bool = False
    # GPUs each node declares through GRES: fake devices (like /dev/null), so Slurm allocates and binds them.
    gpus_per_node: int = 2
    # slurmdbd and a MariaDB of the cluster's own (accounting.py): sacct answers.
    accounting: bool = False
    # Several partitions (--partition NAME:NODES[:GPUS], partitions.py): the first the default, the nodes their
    # union; `nodes` and `partition` then follow from them.
    partitions: tuple[PartitionSpec, ...] = ()
    # The site kit as Prolog and Epilog (hpc-train site firewall): each job's ports open to its own nodes alone.
    site_firewall: bool = False
    # A site's job_submit.lua (JobSubmitPlugins=lua): slurmctld runs its slurm_job_submit at each submit and its
    # slurm_job_modify at each update, as a site's does (its policies tried here: a refused resize, a default QOS).
    job_submit_lua: Path | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "directory", Path(self.directory).absolute())
        if self.job_submit_lua is not None:
            object.__setattr__(self, "job_submit_lua", Path(self.job_submit_lua).absolute())
            if not self.job_submit_lua.is_file():
                raise HpcTrainError(f"--job-submit-lua {self.job_submit_lua}: no such file (or not a file); give a "
                                    "site's job_submit.lua (Lua functions slurm_job_submit and slurm_job_modify)")
        if self.partitions:
            specs = tuple(parse_partition(spec) if isinstance(spec, str) else spec for spec in self.partitions)
            check_partitions(specs, self.gpus_per_node)
            object.__setattr__(self, "partitions", specs)
            object.__setattr__(self, "nodes", compressed(union_nodes(specs)))
            object.__setattr__(self, "partition", specs[0].name)
        expand_nodelist("--nodes", self.nodes)  # refuse a bad node list at once
        if self.cpus < 1:
            raise HpcTrainError(f"--cpus {self.cpus}: a node needs at least 1 CPU")
        if not 0 <= self.gpus_per_node <= MAX_GPUS_PER_NODE:
            raise HpcTrainError(f"--gpus-per-node {self.gpus_per_node}: give 0 (no GPUs) to {MAX_GPUS_PER_NODE}")
        if not 1024 <= self.controller_port <= 65535 - 1 - len(self.node_names):
            raise HpcTrainError(f"--port {self.controller_port}: pick a port in 1024-65000 with room for the nodes")
        if self.accounting and self.database_port > 65535:
            raise HpcTrainError(f"--port {self.controller_port} --accounting: pick a port below "
                                f"{65535 - DBD_PORT_OFFSET} (slurmdbd and MariaDB listen {DBD_PORT_OFFSET} above it)")
        if self.separate_hosts:
            plan_network(self.controller_port, self.node_names)  # refuse too many nodes at once
        if self.site_firewall and not self.separate_hosts:
            raise HpcTrainError("--site-firewall needs --separate-hosts: on one network stack every node is this "
                                "machine, and every connection comes from loopback")

    @property
    def node_names(self) -> tuple[str, ...]:
        if self.partitions:
            return union_nodes(self.partitions)
        return expand_nodelist("--nodes", self.nodes)

    def gpus_on(self, node: str) -> int:
        """The GPUs `node` declares: its partition's, or --gpus-per-node."""
        return node_gpus(self.partitions, self.gpus_per_node).get(node, self.gpus_per_node)

    @property
    def most_gpus(self) -> int:
        return max((self.gpus_on(node) for node in self.node_names), default=0)

    def node_port(self, index: int) -> int:
        return self.controller_port + 1 + (0 if self.separate_hosts else index)

    @property
    def dbd_port(self) -> int:
        return self.controller_port + DBD_PORT_OFFSET

    @property
    def database_port(self) -> int:
        return self.dbd_port + 1

    @property
    def network(self) -> NetworkPlan:
        """The namespaces, addresses and links separate hosts use (also computed when off, for `down`)."""
        return plan_network(self.controller_port, self.node_names)

    @property
    def conf(self) -> Path:
        return self.directory / "slurm.conf"

    @property
    def lua_conf(self) -> Path:
        return self.directory / "job_submit.lua"  # where Slurm's lua plugin looks for it: next to slurm.conf

    @property
    def gres_conf(self) -> Path:
        return self.directory / "gres.conf"  # where Slurm looks for it: next to slurm.conf

    @property
    def gpu_devices(self) -> tuple[Path, ...]:
        """The fake GPU device nodes, shared by every node (on a real cluster each node has its own /dev/nvidiaN)."""
        return tuple(self.directory / "dev" / f"gpu{index}" for index in range(self.most_gpus))

    @property
    def munge_dir(self) -> Path:
        return self.directory / "munge"

    @property
    def munge_socket(self) -> Path:
        return self.munge_dir / "munge.socket"

    @property
    def munge_key(self) -> Path:
        return self.munge_dir / "munge.key"

    def site_script(self, when: str) -> Path:
        """The Prolog or Epilog slurm.conf names (`when`: prolog, epilog): `hpc-train site firewall --WHEN`."""
        return self.directory / f"site-{when}.sh"

    def pid_file(self, daemon: str) -> Path:
        return self.directory / "run" / f"{daemon}.pid"

    def log_file(self, daemon: str) -> Path:
        return self.directory / "log" / f"{daemon}.log"

    @property
    def daemons(self) -> tuple[str, ...]:
        """Every daemon `up` starts, in start order: munged, (mariadbd, slurmdbd,) slurmctld, one slurmd per node."""
        return ("munged", *(ACCOUNTING_DAEMONS if self.accounting else ()), "slurmctld",
                *(f"slurmd-{name}" for name in self.node_names))


def first_job_id(controller_port: int) -> int:
    """A local cluster's first job id: its port's thousands (7017: 7,017,001), so clusters at other ports count
    apart, and two of their ids meet in the derived port windows only 256 ports apart (pure)."""
    return controller_port * 1000 + 1


def render_slurm_conf(cluster: LocalCluster) -> str:
    """slurm.conf for the cluster: accounting only if asked for, no cgroups, one partition, one slurmd port per node."""
    d = cluster.directory
    lines = [
        "# Written by hpc-train cluster up; rewritten on every up.",
        "ClusterName=hpctrain",
        # Separate hosts reach slurmctld, here in the root namespace, at the bridge's address.
        f"SlurmctldHost=localhost{f'({cluster.network.bridge_address})' if cluster.separate_hosts else ''}",
        f"SlurmctldPort={cluster.controller_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        # cred_expire also sets how long a requeued job waits before it starts again (default 120 s).
        f"AuthInfo=socket={cluster.munge_socket},cred_expire={REQUEUE_WAIT_SECONDS}",
        f"StateSaveLocation={d}/state",
        # Job ids of its own (from its port): two local clusters on one machine never run jobs of the same id at
        # once, whose ports (derived from the id, bootstrap/ports.py) would meet on the one network stack.
        f"FirstJobId={first_job_id(cluster.controller_port)}",
        f"SlurmdSpoolDir={d}/spool/%n",
        f"SlurmctldPidFile={cluster.pid_file('slurmctld')}",
        f"SlurmdPidFile={d}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={cluster.log_file('slurmctld')}",
        f"SlurmdLogFile={d}/log/slurmd-%n.log",
        *(["GresTypes=gpu"] if cluster.most_gpus else []),
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        # slurmd takes the CPUs from here rather than probing: several "nodes" share this machine.
        "SlurmdParameters=config_overrides",
        "ReturnToService=2",
        "MpiDefault=none",
        "SwitchType=switch/none",
        "SchedulerType=sched/backfill",
        # A requeued job waits out cred_expire, then for the next periodic pass (backfill every 30 s by default):
        # one pass a second here, so it starts again within a second or two of being eligible.
        "SchedulerParameters=bf_interval=1,sched_interval=5",
        *_accounting_storage(cluster),
        *_site_kit(cluster),
        *(["JobSubmitPlugins=lua"] if cluster.job_submit_lua else []),
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none",
        "KillWait=5",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        "MinJobAge=600",
    ]
    lines += [f"NodeName={name} {_node_address(cluster, name)} Port={cluster.node_port(index)} CPUs={cluster.cpus} "
              f"{_gres(cluster.gpus_on(name))}State=UNKNOWN" for index, name in enumerate(cluster.node_names)]
    if cluster.partitions:
        lines += partition_lines(cluster.partitions)
    else:
        lines.append(f"PartitionName={cluster.partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def _gres(gpus: int) -> str:
    return f"Gres=gpu:{gpus} " if gpus else ""


def render_gres_conf(cluster: LocalCluster) -> str:
    """gres.conf: each node's GPUs, one fake device file each (no NVML autodetection: there is no driver)."""
    lines = ["# Written by hpc-train cluster up; rewritten on every up.", "AutoDetect=off"]
    if not cluster.partitions:
        return "\n".join(lines + [f"Name=gpu File={device}" for device in cluster.gpu_devices]) + "\n"
    # Nodes differ: each names its own devices (a node that declares no GPU must not be given any).
    lines += [f"NodeName={node} Name=gpu File={device}" for node in cluster.node_names
              for device in cluster.gpu_devices[:cluster.gpus_on(node)]]
    return "\n".join(lines) + "\n"


def hosts_line(cluster: LocalCluster) -> str:
    """The /etc/hosts line that makes the node names resolve to this machine (with separate hosts: one per node,
    each name to its own address)."""
    if cluster.separate_hosts:
        return "\n".join(hosts_lines(cluster.network, f"{HOSTS_MARK} {cluster.directory}"))
    return f"127.0.0.1 {' '.join(cluster.node_names)} {HOSTS_MARK} {cluster.directory}"


def _node_address(cluster: LocalCluster, name: str) -> str:
    """Where slurmctld and the other nodes reach a node: this machine, or its own namespace's address."""
    if not cluster.separate_hosts:
        return "NodeHostname=localhost"
    return f"NodeHostname={name} NodeAddr={cluster.network.host(name).address}"


def _site_kit(cluster: LocalCluster) -> list[str]:
    """Prolog and Epilog as an administrator sets them; Alloc: the prolog runs on every node as the job starts,
    before its batch script, rather than at each node's first step."""
    if not cluster.site_firewall:
        return []
    return [f"Prolog={cluster.site_script('prolog')}", f"Epilog={cluster.site_script('epilog')}", "PrologFlags=Alloc"]


def render_site_script(cluster: LocalCluster, when: str, python: str) -> str:
    """The wrapper slurm.conf names (it takes no arguments): this checkout's hpc-train, its lines in the log."""
    return (f"#!/bin/sh\n# Written by hpc-train cluster up --site-firewall; slurmd runs it as its {when.title()}.\n"
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin; export PATH\n"
            f"{shlex.quote(python)} -m hpc_train site firewall --{when} "
            f"--log {shlex.quote(str(cluster.log_file('site-firewall')))}\n"
            "exit 0  # even were hpc-train broken: a failed Prolog drains the node\n")


def _accounting_storage(cluster: LocalCluster) -> list[str]:
    """Where slurmctld sends job records: nowhere, or the cluster's own slurmdbd."""
    if not cluster.accounting:
        return ["AccountingStorageType=accounting_storage/none"]
    return ["AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=localhost",
            f"AccountingStoragePort={cluster.dbd_port}",
            # The munge socket for talking to slurmdbd: AuthInfo's is not used there (the default socket would be).
            f"AccountingStoragePass={cluster.munge_socket}",
            # sacct shows GPUs only for the TRES named here: without it no job would appear to hold any.
            *(["AccountingStorageTRES=gres/gpu"] if cluster.most_gpus else [])]
