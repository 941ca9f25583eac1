"""A job's resource request, validated before anything reaches Slurm.

Tasks: by default one task per GPU (`--ntasks-per-node` = GPUs per node), all of
them MultiWorkerMirrored; `one_task_per_node` gives each node one task that
mirrors over all its GPUs; with no GPUs, CPU tasks (`tasks_per_node`, default 1).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from hpc_train.config import COMMAND_SIGNALS, JOB_STRATEGIES, KERAS_CHOICES
from hpc_train.errors import HpcTrainError

# The forms sbatch --time takes: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
_TIME = re.compile(r"^(?:(\d+)-(\d+)(?::(\d{1,2}))?(?::(\d{1,2}))?|(\d+)(?::(\d{1,2}))?(?::(\d{1,2}))?)$")
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


@dataclass(frozen=True)
class JobSpec:
    nodes: int
    gpus_per_node: int = 0
    strategy: Literal["multiworker", "parameter_server"] = "multiworker"
    num_ps: int = 1
    one_task_per_node: bool = False
    # CPU tasks per node when there are no GPUs (with GPUs: one per GPU, or one per node).
    cpu_tasks_per_node: int = 1
    name: str = "hpc-train"
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str | None = None
    mem: str | None = None
    constraint: str | None = None
    cpus_per_task: int | None = None
    exclusive: bool = False
    gres: str | None = None
    container: str | None = None
    hold: bool = False  # submitted held, released with scontrol release
    # Seconds before the time limit at which Slurm warns the tasks (they checkpoint and requeue); 0: no warning.
    signal_seconds: int = 120
    # A user's command (submit -- COMMAND): what its tf.keras is, and the signal the warning reaches it as.
    keras: Literal["auto", "2", "3"] = "auto"
    command_signal: Literal["USR1", "TERM"] = "USR1"
    # A user's command: its exit codes that are worth a retry (any other plain exit is the command's own verdict).
    retry_exit_codes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        _check_counts(self)
        _check_text(self)
        _check_gres(self)
        if self.strategy not in JOB_STRATEGIES:
            raise JobSpecError(f"--strategy {self.strategy!r}: expected {' or '.join(JOB_STRATEGIES)}")
        if self.keras not in KERAS_CHOICES or self.command_signal not in COMMAND_SIGNALS:
            raise JobSpecError(f"--keras {self.keras!r} --command-signal {self.command_signal!r}: expected auto, 2 "
                               "or 3, and USR1 or TERM")
        if any(isinstance(code, bool) or not isinstance(code, int) or not 1 <= code <= 255
               for code in self.retry_exit_codes):
            raise JobSpecError(f"--retry-exit-codes {','.join(map(str, self.retry_exit_codes))}: exit codes are "
                               "whole numbers from 1 to 255, comma-separated (e.g. 3,17)")
        if self.strategy == "parameter_server" and self.num_ps > self.num_tasks - 2:
            raise JobSpecError(
                f"--num-ps {self.num_ps} needs at least {self.num_ps + 2} tasks (1 chief + {self.num_ps} ps + "
                f"1 worker) but {self.nodes} node(s) x {self.tasks_per_node} task(s) give {self.num_tasks}; "
                "lower --num-ps or ask for more nodes")

    @property
    def tasks_per_node(self) -> int:
        if self.gpus_per_node == 0:
            return self.cpu_tasks_per_node
        return 1 if self.one_task_per_node else self.gpus_per_node

    @property
    def num_tasks(self) -> int:
        return self.nodes * self.tasks_per_node


def _check_counts(spec: JobSpec) -> None:
    for option, value, least in (("--nodes", spec.nodes, 1), ("--gpus-per-node", spec.gpus_per_node, 0),
                                 ("--num-ps", spec.num_ps, 1), ("--ntasks-per-node", spec.cpu_tasks_per_node, 1),
                                 ("--cpus-per-task", spec.cpus_per_task, 1),
                                 ("--signal-seconds", spec.signal_seconds, 0)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
            raise JobSpecError(f"{option} {value!r}: must be a whole number of {least} or more")
    if spec.time is not None:
        time_minutes(spec.time)  # refuses what is not a Slurm time


def _check_text(spec: JobSpec) -> None:
    """Refuse what quoting cannot make safe: line breaks end an #SBATCH line, '/' makes paths of names."""
    for option, value in (("--name", spec.name), ("--partition", spec.partition), ("--account", spec.account),
                          ("--qos", spec.qos), ("--mem", spec.mem), ("--constraint", spec.constraint),
                          ("--gres", spec.gres), ("--container", spec.container)):
        if value is not None and (not value or any(ord(char) < 32 or char == "\x7f" for char in value)):
            raise JobSpecError(f"{option} {value!r}: empty, or holds a line break or control character")
    if "/" in spec.name or spec.name.startswith("."):
        raise JobSpecError(f"--name {spec.name!r}: names a folder under runs/, so no '/' and no leading '.'")


def _check_gres(spec: JobSpec) -> None:
    if spec.gres is None:
        return
    gpu_parts = [part for part in spec.gres.split(",") if part.startswith("gpu")]
    for part in gpu_parts:
        match = _GRES_GPUS.match(part)
        if match is None:
            raise JobSpecError(f"--gres {spec.gres!r}: expected gpu:N or gpu:TYPE:N")
        if int(match.group(1)) != spec.gpus_per_node:
            raise JobSpecError(f"--gres {spec.gres!r} asks for {match.group(1)} GPUs per node but --gpus-per-node "
                               f"is {spec.gpus_per_node}; make them agree (or drop --gres)")
