"""What a job asks of Slurm, as #SBATCH lines (pure): each group's options from the request, and a script's read back.

`directives` are one group's options (the first's hold the job's own: name, account, time, dependency, log,
requeue, the time-limit warning), `directive_lines` every group's lines as a script holds them (`#SBATCH hetjob`
between two groups). `asked` reads a script's RESOURCES back, so that the tests compare what a plan asks with what
Slurm received (`scontrol write batch_script`): `differences`.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from hpc_train.bootstrap.ports import service_comment
from hpc_train.spec.request import Group, JobRequest, time_minutes

# What a script asks of Slurm that a job's run depends on: compared between the plan and what Slurm received.
RESOURCES = ("nodes", "ntasks", "ntasks-per-node", "mincpus", "cpus-per-task", "gpus-per-node", "gres", "mem",
             "constraint", "exclusive", "time", "partition", "account", "qos", "array", "signal", "requeue",
             "dependency", "no-kill")


def directives(request: JobRequest, group: Group | None = None) -> dict[str, str | int | bool]:
    """One group's #SBATCH options (default: the first), name -> value (True: a bare flag); unset ones left out.
    The first group's also hold the job's own (name, account, time, dependency, log, requeue, warning)."""
    group = group or request.groups[0]
    values: dict[str, str | int | bool | None] = {
        "nodes": str(group.node_range), "gpus-per-node": group.gpus_per_node or None,
        # The chief and ps need not fill their nodes evenly: their count in all (Slurm spreads them, block).
        **({"ntasks": group.ntasks} if group.ntasks is not None else tasks_per_node(group)),
        **service_mincpus(request, group),
        "cpus-per-task": group.cpus_per_task, "partition": group.partition, "mem": group.mem,
        "constraint": group.constraint, "gres": group.gres, "exclusive": group.exclusive or None,
        # --sbatch's: in every group, so that the whole job has them (a node excluded, a reservation, ...).
        **{name: True if value is None else value for name, value in request.sbatch},
    }
    if group is request.groups[0]:
        values |= {
            "job-name": request.name, "account": request.account, "qos": request.qos, "time": request.time,
            "dependency": request.dependency,
            "output": "slurm-%x-%j.out",
            # A requeued job (the tasks requeue it when warned) appends to its log and resumes in its folder.
            "open-mode": "append", "requeue": True,
            "signal": f"USR1@{request.signal_seconds}" if request.signal_seconds else None,
            "comment": job_comment(request),
        }
    return {name: value for name, value in sorted(values.items()) if value is not None}


def job_comment(request: JobRequest) -> str | None:
    """The job's Slurm comment: --sbatch comment=...'s, after the word that tells the site kit's firewall the ports
    of the job's data service above its ranks' (bootstrap.ports.service_comment: the window grows by them) and, on a
    partition of its own, its component, first so that `scontrol show job -o` shows them whole."""
    given = dict(request.sbatch).get("comment")
    service = request.data_service
    if service is None:
        return given
    # Its own component, the last (data_component): the kit counts the ranks' components without it.
    component = len(request.groups) if service.component else None
    return " ".join(filter(None, [service_comment(service.processes, component), given]))


def data_component(request: JobRequest) -> dict[str, str | int | bool] | None:
    """The #SBATCH options of the data service's own component (`--data-partition P`), the job's last: its dispatcher
    and its N workers as N + 1 tasks of C CPUs on partition P, on as few nodes as Slurm fits them (the job body
    starts them there as steps: injob/servicecomponent.py); None for a service beside the ranks, or none."""
    service = request.data_service
    if service is None or not service.component:
        return None
    values: dict[str, str | int | bool] = {"partition": str(service.partition), "ntasks": service.processes,
                                           **({"cpus-per-task": service.cpus} if service.cpus > 1 else {}),
                                           **{name: True if value is None else value for name, value in request.sbatch}}
    return dict(sorted(values.items()))


def tasks_per_node(group: Group) -> dict[str, int]:
    """A group's tasks on each node. A range leaves --ntasks-per-node out, which would make Slurm 22.05 give it MIN
    nodes even when more are free: each node is asked for the CPUs of its tasks (--mincpus), and the job body
    starts the step with as many tasks per node on the nodes the attempt got (injob/body.py)."""
    if not group.ranged:
        return {"ntasks-per-node": group.tasks_per_node}
    cpus = group.tasks_per_node * (group.cpus_per_task or 1)
    return {"mincpus": cpus} if cpus > 1 else {}


def service_cpus(request: JobRequest, group: Group) -> int:
    """The CPUs the job's data service takes on each node of `group` beside its ranks: the first group's (srun puts
    the service's steps on a heterogeneous job's first component), ceil(W / MIN nodes) workers of C CPUs; 0 for
    another group, a service on a partition of its own, or none (pure)."""
    service = request.data_service
    if service is None or group is not request.groups[0]:
        return 0
    return service.cpus_per_node(group.node_range.least)


def service_mincpus(request: JobRequest, group: Group) -> dict[str, int]:
    """--mincpus for a group whose nodes also run the data service's workers: each node's ranks' CPUs and the
    workers' placed there, so that the allocation holds both (Slurm 22.05 gives a node that many CPUs, checked with
    `scontrol show job -d`'s CPU_IDs: an `srun --overlap` step still fits in the job's CPUs only, so without them
    the workers' step is refused). {} without a service there. With --ntasks-per-node and --cpus-per-task over 1,
    Slurm 22.05 holds ntasks-per-node x cpus-per-task on a node whatever --mincpus says, so none is asked: the
    workers share the ranks' CPUs, and the job body says so in one line when they cannot fit even so
    (data_service/placement.py)."""
    service = service_cpus(request, group)
    if not service or (group.cpus_per_task or 1) > 1:  # (there Slurm would not give it: asked, it only misleads)
        return {}
    return {"mincpus": ranks_cpus(group) + service}


def ranks_cpus(group: Group) -> int:
    """The CPUs a node of `group` holds for its ranks (the fullest, for --ntasks over a node range's MIN) (pure)."""
    ranks = -(-group.num_tasks // group.node_range.least) if group.ntasks is not None else group.tasks_per_node
    return ranks * (group.cpus_per_task or 1)


def directive_lines(request: JobRequest, first: Mapping[str, str | int | bool] | None = None) -> list[str]:
    """Every group's #SBATCH lines, a `#SBATCH hetjob` between two groups, the data service's component last when it
    has one; `first`: options added to the first's."""
    lines: list[str] = []
    blocks = [{**directives(request, group), **(first or {} if index == 0 else {})}
              for index, group in enumerate(request.groups)]
    for index, wanted in enumerate([*blocks, *filter(None, [data_component(request)])]):
        lines += ["#SBATCH hetjob"] if index else []
        lines += [f"#SBATCH --{name}" if value is True else f"#SBATCH --{name}={shlex.quote(str(value))}"
                  for name, value in sorted(wanted.items())]
    return lines


def asked(script: str) -> dict[str, str]:
    """A script's first group's RESOURCES from its #SBATCH lines (a flag: "", a time: in minutes; pure)."""
    found: dict[str, str] = {}
    for line in script.splitlines():
        if line.strip() == "#SBATCH hetjob":
            break
        if not line.startswith("#SBATCH --"):
            continue
        name, _, value = line[len("#SBATCH --"):].partition("=")
        if name in RESOURCES:
            found[name] = " ".join(shlex.split(value)) if value else ""
    if "time" in found:
        found["time"] = str(time_minutes(found["time"]))
    return found


def differences(plan: Mapping[str, str], received: Mapping[str, str]) -> dict[str, tuple[str | None, str | None]]:
    """Each resource the two ask differently: (the plan's, the other's)."""
    return {name: (plan.get(name), received.get(name)) for name in sorted({*plan, *received})
            if plan.get(name) != received.get(name)}
