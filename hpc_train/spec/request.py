"""A job's request, validated before anything reaches Slurm: one or more groups of nodes, and the job's own
settings.

Tasks: by default one task per GPU (`--ntasks-per-node` = GPUs per node), all of
them MultiWorkerMirrored; `one_task_per_node` gives each node one task that
mirrors over all its GPUs; with no GPUs, CPU tasks (`tasks_per_node`, default 1).
A job has one group (`JobRequest.one_group`), or two for parameter servers on CPU nodes
(`JobRequest.parameter_servers`): a heterogeneous job, the chief and ps in group 0 on a CPU partition, the
workers in group 1, each group a block of #SBATCH lines (`#SBATCH hetjob` between them).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from hpc_train.config import COMMAND_SIGNALS, JOB_STRATEGIES, KERAS_CHOICES
from hpc_train.container.runtime import RUNTIMES
from hpc_train.errors import HpcTrainError
from hpc_train.spec.data_service import DataService
from hpc_train.spec.noderange import NodeRange
from hpc_train.spec.pack import Pack, PackError, Share, share_of
from hpc_train.spec.sbatchoptions import dependency_problem, options_problem

# The forms sbatch --time takes: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
_TIME = re.compile(r"^(?:(\d+)-(\d+)(?::(\d{1,2}))?(?::(\d{1,2}))?|(\d+)(?::(\d{1,2}))?(?::(\d{1,2}))?)$")
_PARTITION_NAME = re.compile(r"[^\s,](?:[^,]*[^\s,])?")  # one name of Slurm's list: no blank around its commas
_GRES_GPUS = re.compile(r"^gpu(?::[^:,]+)?:(\d+)$")


class JobSpecError(HpcTrainError):
    """A resource request Slurm could not, or should not, be given."""


def time_minutes(text: str) -> int:
    """A Slurm time (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) in whole minutes, rounded up."""
    match = _TIME.match(text.strip())
    if match is None:
        raise JobSpecError(f"--time {text!r}: not a Slurm time; use minutes, HH:MM:SS or D-HH:MM:SS "
                           "(e.g. 90, 2:00:00, 1-12:00:00)")
    days, day_hours, day_minutes, day_seconds, first, second, third = (int(part) if part else 0
                                                                       for part in match.groups())
    if match.group(1) is not None:  # D-HH[:MM[:SS]]
        seconds = days * 86400 + day_hours * 3600 + day_minutes * 60 + day_seconds
    elif match.group(7) is not None:  # HH:MM:SS
        seconds = first * 3600 + second * 60 + third
    else:  # MM[:SS]
        seconds = first * 60 + second
    return max(1, -(-seconds // 60))


# The roles of a job's tasks (bootstrap/roles.py places them); a job of one group runs every one of them.
ROLES = ("chief", "worker", "ps")


@dataclass(frozen=True)
class Group:
    """Nodes of a job alike: how many, the tasks and GPUs on each, what Slurm gives them (one #SBATCH block), and
    the roles their tasks take. A job has one; a heterogeneous one (`#SBATCH hetjob`: chief and ps on a CPU
    partition, workers on a GPU one, --ps-partition) has one per kind of node."""

    nodes: int
    gpus_per_node: int = 0
    one_task_per_node: bool = False
    # CPU tasks per node when there are no GPUs (with GPUs: one per GPU, or one per node).
    cpu_tasks_per_node: int = 1
    partition: str | None = None
    constraint: str | None = None
    mem: str | None = None
    cpus_per_task: int | None = None
    exclusive: bool = False
    gres: str | None = None
    roles: tuple[str, ...] = ROLES
    # The group's tasks in all, when they need not fill its nodes evenly (sbatch --ntasks: the chief and K ps on
    # M nodes); None: nodes x tasks_per_node.
    ntasks: int | None = None
    # A node range (--nodes MIN-MAX): each attempt runs on what Slurm gives, from this many up to `nodes`; None: a
    # fixed size.
    min_nodes: int | None = None

    def __post_init__(self) -> None:
        if self.min_nodes is not None and not (isinstance(self.min_nodes, int) and 1 <= self.min_nodes <= self.nodes):
            raise JobSpecError(f"{self.option('nodes')} {self.min_nodes}-{self.nodes}: MIN must be from 1 to MAX")
        _check_counts(((self.option("nodes"), self.nodes, 1), ("--gpus-per-node", self.gpus_per_node, 0),
                       ("--ntasks", self.ntasks, 1), ("--ntasks-per-node", self.cpu_tasks_per_node, 1),
                       ("--cpus-per-task", self.cpus_per_task, 1)))
        _check_text(((self.option("partition"), self.partition), ("--mem", self.mem), ("--constraint", self.constraint),
                     ("--gres", self.gres)))
        _check_gres(self)
        if self.partition is not None and not all(map(_PARTITION_NAME.fullmatch, self.partition.split(","))):
            raise JobSpecError(f"{self.option('partition')} {self.partition!r}: a partition's name, or several "
                               "separated by commas without spaces (e.g. gpu,debug: the job starts in whichever can "
                               "run it first)")
        if not self.roles or set(self.roles) - set(ROLES):
            raise JobSpecError(f"roles {', '.join(self.roles) or '(none)'}: expected some of {', '.join(ROLES)}")

    @property
    def partitions(self) -> tuple[str, ...]:
        """The partitions named (Slurm's own list, `--partition a,b`: whichever can start the job first); none: the
        cluster's default one."""
        return tuple(self.partition.split(",")) if self.partition else ()

    @property
    def tasks_per_node(self) -> int:
        if self.gpus_per_node == 0:
            return self.cpu_tasks_per_node
        return 1 if self.one_task_per_node else self.gpus_per_node

    @property
    def num_tasks(self) -> int:
        return self.ntasks if self.ntasks is not None else self.nodes * self.tasks_per_node

    @property
    def node_range(self) -> NodeRange:
        return NodeRange(self.nodes if self.min_nodes is None else self.min_nodes, self.nodes)

    @property
    def ranged(self) -> bool:
        return not self.node_range.fixed

    @property
    def replicas_per_node(self) -> int:
        """MultiWorkerMirrored's replicas on a node: one per GPU (a task each, or one task mirroring them), else one
        per CPU task."""
        return self.gpus_per_node or self.cpu_tasks_per_node

    @property
    def holds_workers(self) -> bool:
        return WORKER in self.roles

    def option(self, name: str) -> str:
        """The command-line option that set this group's `name` (nodes, partition): the ps group's own, --ps-*."""
        return f"--{name}" if self.holds_workers else f"--ps-{name}"


WORKER = "worker"


@dataclass(frozen=True)
class JobRequest:
    """A whole job request: its groups of nodes, and what holds for the whole job. Built once from the options
    and the YAML (spec/options.py) and read by every path: submit, render, sweeps, --local, preflight, dry-run."""

    groups: tuple[Group, ...]
    strategy: Literal["multiworker", "parameter_server"] = "multiworker"
    num_ps: int = 1
    name: str = "hpc-train"
    account: str | None = None
    qos: str | None = None
    time: str | None = None
    container: str | None = None  # every rank runs in this image (docs/containers.md)
    container_runtime: str | None = None  # None: the image says which (container/runtime.py)
    hold: bool = False  # submitted held, released with scontrol release
    # Seconds before the time limit at which Slurm warns the tasks (they checkpoint and requeue); 0: no warning.
    signal_seconds: int = 120
    # A user's command (submit -- COMMAND): what its tf.keras is, and the signal the warning reaches it as.
    keras: Literal["auto", "2", "3"] = "auto"
    command_signal: Literal["USR1", "TERM"] = "USR1"
    # A user's command: its exit codes that are worth a retry (any other plain exit is the command's own verdict).
    retry_exit_codes: tuple[int, ...] = ()
    # When it may start: Slurm's --dependency (--after JOBID is afterany:JOBID); the first group's, the whole job's.
    dependency: str | None = None
    # sbatch's options without a flag of their own (--sbatch OPTION=VALUE; None: a flag), in every group's block.
    sbatch: tuple[tuple[str, str | None], ...] = ()
    # A packed sweep (submit --pack): one job whose body runs the trials as steps, each on this share of it.
    pack: Pack | None = None
    data_service: DataService | None = None  # TensorFlow's data service run with the job (spec/data_service.py)

    def __post_init__(self) -> None:
        if not self.groups:
            raise JobSpecError("a job needs at least one group of nodes")
        _check_counts((("--num-ps", self.num_ps, 1), ("--signal-seconds", self.signal_seconds, 0)))
        if self.time is not None:
            time_minutes(self.time)  # refuses what is not a Slurm time
        _check_text((("--name", self.name), ("--account", self.account), ("--qos", self.qos),
                     ("--container", self.container)))
        if "/" in self.name or self.name.startswith("."):
            raise JobSpecError(f"--name {self.name!r}: names a folder under runs/, so no '/' and no leading '.'")
        _check_choices(self)
        if self.container_runtime is not None and self.container_runtime not in RUNTIMES:
            raise JobSpecError(f"--container-runtime {self.container_runtime!r}: expected one of {', '.join(RUNTIMES)}")
        if self.container_runtime is not None and self.container is None:
            raise JobSpecError("--container-runtime names the runtime of an image: add --container IMAGE")
        problem = options_problem(self.sbatch) or (self.dependency is not None and dependency_problem(self.dependency))
        if problem:
            raise JobSpecError(problem)
        if self.strategy == "parameter_server" and self.num_ps > self.num_tasks - 2:
            raise JobSpecError(
                f"--num-ps {self.num_ps} needs at least {self.num_ps + 2} tasks (1 chief + {self.num_ps} ps + "
                f"1 worker) but {_shape(self)} give {self.num_tasks}; "
                "lower --num-ps or ask for more nodes")
        if len(self.groups) > 1:
            _check_components(self)
        if self.pack is not None:
            _check_pack(self)
        fewest = sum(group.ntasks or group.node_range.least * group.tasks_per_node for group in self.groups)
        if self.strategy == "parameter_server" and self.ranged and self.num_ps > fewest - 2:
            raise JobSpecError(f"--nodes {self.groups[-1].node_range}: at its MIN the job has {fewest} task(s), but 1 "
                               f"chief + {self.num_ps} ps + 1 worker are {self.num_ps + 2}; raise MIN or lower --num-ps")
        if any(group.ranged and group.ntasks is not None for group in self.groups):
            raise JobSpecError("a node range applies to the workers' nodes; give the chief and ps a fixed --ps-nodes")

    @property
    def ranged(self) -> bool:
        """Whether the job asks for a node range (its worker group's --nodes MIN-MAX)."""
        return any(group.ranged for group in self.groups)

    @classmethod
    def one_group(cls, nodes: int, gpus_per_node: int = 0, one_task_per_node: bool = False,
                  cpu_tasks_per_node: int = 1, partition: str | None = None, constraint: str | None = None,
                  mem: str | None = None, cpus_per_task: int | None = None, exclusive: bool = False,
                  gres: str | None = None, min_nodes: int | None = None, **job_wide: Any) -> JobRequest:
        """The request of one group of nodes (every job today): the group's settings, then the job's."""
        return cls((Group(nodes, gpus_per_node, one_task_per_node, cpu_tasks_per_node, partition, constraint, mem,
                          cpus_per_task, exclusive, gres, min_nodes=min_nodes),), **job_wide)

    @classmethod
    def parameter_servers(cls, workers: Group, ps_partition: str, ps_nodes: int = 1, num_ps: int = 1,
                          **job_wide: Any) -> JobRequest:
        """A heterogeneous job: the chief and `num_ps` ps on `ps_nodes` nodes of `ps_partition` (no GPU, one task a
        rank), then `workers`' group (its GPUs, as a job of one group would have them)."""
        servers = Group(ps_nodes, partition=ps_partition, roles=("chief", "ps"), ntasks=1 + num_ps)
        return cls((servers, replace(workers, roles=(WORKER,))), strategy="parameter_server", num_ps=num_ps,
                   **job_wide)

    @property
    def heterogeneous(self) -> bool:
        return len(self.groups) > 1

    @property
    def components(self) -> int:
        """The job's components in Slurm: its groups, and its data service's own when it has a partition (the last
        one, spec/directives.py:data_component)."""
        return len(self.groups) + (1 if self.data_service is not None and self.data_service.component else 0)

    @property
    def group(self) -> Group:
        """The job's one group, for what takes a job of one group only (submitit, the mock launcher)."""
        if len(self.groups) != 1:
            raise JobSpecError(f"a job of {len(self.groups)} groups of nodes (a heterogeneous job) cannot run this "
                               "way yet; render it, or ask for one group")
        return self.groups[0]

    @property
    def nodes(self) -> int:
        return sum(group.nodes for group in self.groups)

    @property
    def share(self) -> Share | None:
        """A packed sweep's trial share (None: not packed)."""
        if self.pack is None:
            return None
        group = self.group
        return share_of(self.pack, group.nodes, group.gpus_per_node, group.cpu_tasks_per_node,
                        group.one_task_per_node, group.cpus_per_task)

    @property
    def num_tasks(self) -> int:
        return sum(group.num_tasks for group in self.groups)


# Today's one-group request, by the name it had before groups (tests and callers that build one still use it).
JobSpec = JobRequest.one_group


def fixed_global_batch(request: JobRequest, batch_size: int, given: int | None) -> int | None:
    """The global batch every attempt of a ranged multiworker job trains with (pure): `given` (the global_batch
    setting), refused in one line when some size of the range cannot divide it among its replicas; else batch_size x
    the replicas at MAX nodes, rounded up to the next batch every size shares evenly (global_batch_note says so).
    None for a fixed size, and for parameter_server, whose step is one worker's batch of batch_size at every size."""
    if not request.ranged or request.strategy != "multiworker":
        return given
    group = request.groups[-1]
    if given is None:
        every_size = math.lcm(*(size * group.replicas_per_node for size in group.node_range.sizes()))
        return -(-batch_size * group.replicas_per_node * group.nodes // every_size) * every_size
    for size in group.node_range.sizes():
        replicas = size * group.replicas_per_node
        if given % replicas:
            raise JobSpecError(f"--nodes {group.node_range}: a global batch of {given} cannot be shared by the "
                               f"{replicas} replicas of {size} node(s); set global_batch to a multiple of every "
                               "size's replicas (--set global_batch=N), or narrow the range")
    return given


def global_batch_note(request: JobRequest, batch_size: int, given: int | None) -> str | None:
    """One line when fixed_global_batch rounded the range's global batch up from batch_size x the replicas at MAX
    (none was given): what it is, what each size's replicas get, and how to choose it."""
    total = fixed_global_batch(request, batch_size, given)
    if given is not None or total is None:
        return None
    group = request.groups[-1]
    at_most = group.replicas_per_node * group.nodes
    if total == batch_size * at_most:
        return None
    shares = ", ".join(f"{total // (size * group.replicas_per_node)} on {size}" for size in group.node_range.sizes())
    return (f"--nodes {group.node_range}: the global batch is {total}, not {batch_size} x {at_most} replicas, so "
            f"that every size shares it evenly (per replica: {shares} node(s)); --set global_batch=N chooses it")


def _shape(request: JobRequest) -> str:
    """The request's nodes and tasks in words: `2 node(s) x 1 task(s)`, a group's after another's."""
    return " + ".join(f"{group.nodes} node(s) x {group.tasks_per_node} task(s)" for group in request.groups)


PS_PARTITION_WITHOUT_PS = ("--ps-partition applies to --strategy parameter_server (the chief and ps on CPU nodes); "
                           "add it, or drop --ps-partition for multiworker")


def _check_components(request: JobRequest) -> None:
    """A heterogeneous job is the parameter-server one: the chief and the ps in group 0, the workers after."""
    if request.strategy != "parameter_server":
        raise JobSpecError(PS_PARTITION_WITHOUT_PS)
    servers = request.groups[0]
    if servers.num_tasks != 1 + request.num_ps:
        raise JobSpecError(f"the ps group runs {servers.num_tasks} tasks but 1 chief + {request.num_ps} ps are "
                           f"{1 + request.num_ps}")
    if servers.nodes > servers.num_tasks:
        raise JobSpecError(f"--ps-nodes {servers.nodes}: the chief and {request.num_ps} ps are {servers.num_tasks} "
                           f"tasks, one a node at most; ask for at most {servers.num_tasks} (or raise --num-ps)")


def _check_pack(request: JobRequest) -> None:
    """A packed sweep is one plain job whose trials fit its nodes: one line for what cannot be packed."""
    if request.heterogeneous:
        raise PackError("--pack with --ps-partition: a packed sweep is one job of one kind of node, each trial a "
                        "step on its share; drop --ps-partition, or --pack (an array of heterogeneous jobs is "
                        "not possible either: submit the elements one by one)")
    share = request.share
    assert share is not None
    if request.strategy == "parameter_server" and share.nodes * share.tasks < request.num_ps + 2:
        raise PackError(f"--pack with parameter_server: each trial needs 1 chief + {request.num_ps} ps + 1 worker "
                        f"but its share runs {share.nodes * share.tasks} task(s); ask --trial-gpus or --trial-nodes "
                        "for more, or --strategy multiworker")


def _check_counts(counts: tuple[tuple[str, int | None, int], ...]) -> None:
    """Each (option, value, least): a whole number of `least` or more, or None where it may be left out."""
    for option, value, least in counts:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
            raise JobSpecError(f"{option} {value!r}: must be a whole number of {least} or more")


def project_name(folder: Path, otherwise: str = "hpc-train") -> str:
    """A job's default name: its project folder's (where submit or render runs; the folder init writes), as the
    starter's job.sbatch says it; a hidden folder's dot dropped (a hidden job folder is refused); `otherwise`
    where nothing usable is left (/, a name with control characters) (pure)."""
    name = folder.name.lstrip(".")
    return name if name and not any(ord(char) < 32 or char == "\x7f" for char in name) else otherwise


def _check_text(texts: tuple[tuple[str, str | None], ...]) -> None:
    """Refuse what quoting cannot make safe: line breaks end an #SBATCH line."""
    for option, value in texts:
        if value is not None and (not value or any(ord(char) < 32 or char == "\x7f" for char in value)):
            raise JobSpecError(f"{option} {value!r}: empty, or holds a line break or control character")


def _check_choices(request: JobRequest) -> None:
    """Each choice against its one list (config.py), and the exit codes worth a retry."""
    if request.strategy not in JOB_STRATEGIES:
        raise JobSpecError(f"--strategy {request.strategy!r}: expected {' or '.join(JOB_STRATEGIES)}")
    if request.keras not in KERAS_CHOICES or request.command_signal not in COMMAND_SIGNALS:
        raise JobSpecError(f"--keras {request.keras!r} --command-signal {request.command_signal!r}: expected auto, 2 "
                           "or 3, and USR1 or TERM")
    if any(isinstance(code, bool) or not isinstance(code, int) or not 1 <= code <= 255
           for code in request.retry_exit_codes):
        raise JobSpecError(f"--retry-exit-codes {','.join(map(str, request.retry_exit_codes))}: exit codes are "
                           "whole numbers from 1 to 255, comma-separated (e.g. 3,17)")


def _check_gres(group: Group) -> None:
    if group.gres is None:
        return
    gpu_parts = [part for part in group.gres.split(",") if part.startswith("gpu")]
    for part in gpu_parts:
        match = _GRES_GPUS.match(part)
        if match is None:
            raise JobSpecError(f"--gres {group.gres!r}: expected gpu:N or gpu:TYPE:N")
        if int(match.group(1)) != group.gpus_per_node:
            raise JobSpecError(f"--gres {group.gres!r} asks for {match.group(1)} GPUs per node but --gpus-per-node "
                               f"is {group.gpus_per_node}; make them agree (or drop --gres)")
