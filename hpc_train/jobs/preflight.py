"""Never submit what cannot run: a request checked against the partition before it is submitted.

Slurm accepts some requests that can never start (more time than the
partition's MaxTime, more nodes than its MaxNodes where limits are not
enforced at submission) and leaves them pending for ever; others it refuses
with a message that names no option. Here the partition's limits are read
(`scontrol show partition`, `scontrol show node`) and compared with the
request (pure: `limit_problems`), then `sbatch --test-only` asks the scheduler
itself. The first problem found stops the submission with one line naming the
option, the limit and the fix.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

import hostlist

from hpc_train.jobs.spec import JobSpec, JobSpecError

_GPUS = re.compile(r"(?:^|,)gpu(?::[^:,()]+)?:(\d+)")
_UNLIMITED = ("UNLIMITED", "INFINITE", "NONE")


@dataclass(frozen=True)
class Partition:
    """What a partition allows: nodes in all, nodes per job, minutes per job, and each node's GPUs."""

    name: str
    total_nodes: int
    max_nodes: int | None  # None: unlimited
    max_minutes: int | None  # None: unlimited
    node_gpus: tuple[int, ...]
    default: bool = False


def parse_partitions(partitions_text: str, nodes_text: str) -> list[Partition]:
    """Partitions from `scontrol show partition -o` and, for their GPUs, `scontrol show node -o`."""
    gpus = node_gpus(nodes_text)
    found = []
    for line in partitions_text.splitlines():
        fields = _fields(line)
        if "PartitionName" not in fields:
            continue
        names = hostlist.expand_hostlist(fields["Nodes"]) if fields.get("Nodes", "(null)") != "(null)" else []
        found.append(Partition(fields["PartitionName"], int(fields.get("TotalNodes", len(names))),
                               _count(fields.get("MaxNodes", "UNLIMITED")), _minutes(fields.get("MaxTime", "UNLIMITED")),
                               tuple(gpus.get(name, 0) for name in names), fields.get("Default") == "YES"))
    return found


def node_gpus(nodes_text: str) -> dict[str, int]:
    """Node name -> GPUs it declares (`Gres=gpu:2`, `gpu:a100:4(S:0-1)`, several kinds summed)."""
    counts = {}
    for line in nodes_text.splitlines():
        fields = _fields(line)
        if "NodeName" in fields:
            counts[fields["NodeName"]] = sum(int(n) for n in _GPUS.findall(fields.get("Gres", "")))
    return counts


def limit_problems(spec: JobSpec, partition: Partition) -> list[str]:
    """What in the request the partition can never give, each as one line with its fix (pure)."""
    problems = []
    other = "or submit to another partition (--partition; sinfo lists them)"
    if spec.nodes > partition.total_nodes:
        problems.append(f"--nodes {spec.nodes}: partition {partition.name} has {partition.total_nodes} node(s) in all; "
                        f"ask for at most {partition.total_nodes}, {other}")
    elif partition.max_nodes is not None and spec.nodes > partition.max_nodes:
        problems.append(f"--nodes {spec.nodes}: partition {partition.name} allows at most {partition.max_nodes} "
                        f"node(s) per job (MaxNodes); ask for fewer, {other}")
    if spec.gpus_per_node:
        enough = sum(1 for gpus in partition.node_gpus if gpus >= spec.gpus_per_node)
        if enough < spec.nodes:
            most = max(partition.node_gpus, default=0)
            problems.append(f"--gpus-per-node {spec.gpus_per_node}: partition {partition.name} has {enough} node(s) "
                            f"with that many GPUs (at most {most} per node), {spec.nodes} asked for; ask for fewer "
                            f"GPUs or nodes, {other}")
    if spec.time and partition.max_minutes is not None:
        from hpc_train.jobs.submit import time_minutes

        if time_minutes(spec.time) > partition.max_minutes:
            problems.append(f"--time {spec.time}: beyond partition {partition.name}'s time limit of "
                            f"{_format_minutes(partition.max_minutes)} (MaxTime); ask for less (the job checkpoints "
                            f"and requeues itself at its limit), {other}")
    return problems


def check_request(spec: JobSpec, env: Mapping[str, str]) -> None:
    """Raise JobSpecError naming the first thing the partition cannot give; return when Slurm would run it."""
    partition = _partition(spec, env)
    problems = limit_problems(spec, partition) if partition else []
    if not problems:
        refusal = test_only(spec, env)
        problems = [refusal] if refusal else []
    if problems:
        raise JobSpecError(problems[0])


def test_only(spec: JobSpec, env: Mapping[str, str]) -> str | None:
    """`sbatch --test-only` with the request's options: None when the scheduler would run it, else why not."""
    from hpc_train.jobs.render import directives

    wanted = {name: value for name, value in directives(spec).items()
              if name not in ("job-name", "output", "open-mode", "requeue", "signal")}
    command = ["sbatch", "--test-only", *_options(wanted), "--wrap=true"]
    try:
        result = subprocess.run(command, env=dict(env), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"sbatch --test-only did not answer ({error}); is Slurm reachable (sinfo)?"
    if result.returncode == 0:
        return None
    said = [line.strip() for line in (result.stderr + result.stdout).splitlines() if line.strip()]
    reason = said[-1] if said else f"exit code {result.returncode}"
    reason = re.sub(r"^(sbatch: error: |allocation failure: )", "", reason)
    return f"Slurm would not run this request ({reason}): {' '.join(_options(wanted))}; ask for less (sinfo shows " \
           "the partitions and their nodes)"


def _partition(spec: JobSpec, env: Mapping[str, str]) -> Partition | None:
    if shutil.which("scontrol") is None:
        return None  # sbatch --test-only still asks the scheduler
    shown = [subprocess.run(["scontrol", "show", what, "-o"], env=dict(env), capture_output=True, text=True)
             for what in ("partition", "node")]
    if any(result.returncode != 0 for result in shown):
        return None
    partitions = parse_partitions(shown[0].stdout, shown[1].stdout)
    if not partitions:
        return None  # nothing to judge by: sbatch --test-only still asks the scheduler
    if spec.partition is None:
        return next((partition for partition in partitions if partition.default), None)
    named = [partition for partition in partitions if partition.name == spec.partition]
    if not named:
        raise JobSpecError(f"--partition {spec.partition}: no such partition here; choose one of "
                           f"{', '.join(partition.name for partition in partitions)}")
    return named[0]


def _options(directives: Mapping[str, object]) -> list[str]:
    return [f"--{name}" if value is True else f"--{name}={value}" for name, value in directives.items()]


def _fields(line: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in line.split() if "=" in part)


def _count(text: str) -> int | None:
    return None if text.upper() in _UNLIMITED or not text.isdigit() else int(text)


def _minutes(text: str) -> int | None:
    if text.upper() in _UNLIMITED:
        return None
    from hpc_train.jobs.submit import time_minutes

    return time_minutes(text)


def _format_minutes(minutes: int) -> str:
    days, rest = divmod(minutes, 24 * 60)
    return f"{f'{days}-' if days else ''}{rest // 60:02d}:{rest % 60:02d}:00"
