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
from collections.abc import Mapping

from hpc_train.container.runtime import image_problem
from hpc_train.errors import HpcTrainError
from hpc_train.login.partitions import Partition, find_partition, format_minutes, read_partitions
from hpc_train.login.script import job_image
from hpc_train.slurm.client import SlurmClient, last_words
from hpc_train.spec.data_service import DataService
from hpc_train.spec.directives import ranks_cpus, service_cpus, service_mincpus
from hpc_train.spec.request import Group, JobRequest, JobSpecError, time_minutes
from hpc_train.spec.sbatchoptions import dependency_jobs


def limit_problems(spec: JobRequest, partition: Partition, group: Group | None = None) -> list[str]:
    """What in one group of the request (default: the first) its partition can never give, each as one line with
    its fix (pure)."""
    group = group or spec.groups[0]
    problems = []
    other = "or submit to another partition (--partition; sinfo lists them)"
    # A range must fit by its MIN: Slurm gives it what there is, up to MAX.
    nodes, asked = group.node_range.least, f"{group.option('nodes')} {group.node_range}"
    least = f", fewer than its MIN {nodes}" if group.ranged else ""
    if nodes > partition.total_nodes:
        problems.append(f"{asked}: partition {partition.name} has {partition.total_nodes} node(s) in all{least}; "
                        f"ask for at most {partition.total_nodes}, {other}")
    elif partition.max_nodes is not None and nodes > partition.max_nodes:
        problems.append(f"{asked}: partition {partition.name} allows at most {partition.max_nodes} node(s) per job "
                        f"(MaxNodes){least}; ask for fewer, {other}")
    if group.gpus_per_node:
        enough = sum(1 for gpus in partition.node_gpus if gpus >= group.gpus_per_node)
        if enough < nodes:
            most = max(partition.node_gpus, default=0)
            problems.append(f"--gpus-per-node {group.gpus_per_node}: partition {partition.name} has {enough} node(s) "
                            f"with that many GPUs (at most {most} per node), {nodes} asked for; ask for fewer "
                            f"GPUs or nodes, {other}")
    problems += service_cpu_problems(spec, partition, group)
    if spec.time and partition.max_minutes is not None:
        if time_minutes(spec.time) > partition.max_minutes:
            problems.append(f"--time {spec.time}: beyond partition {partition.name}'s time limit of "
                            f"{format_minutes(partition.max_minutes)} (MaxTime); ask for less (the job checkpoints "
                            f"and requeues itself at its limit), {other}")
    return problems


def service_cpu_problems(spec: JobRequest, partition: Partition, group: Group) -> list[str]:
    """A data service beside the ranks whose CPUs and the ranks' no node of the partition holds (pure): the request's
    --mincpus (spec/directives.py) beyond every node's CPUs, named by the service's flags; none when the partition's
    nodes do not say their CPUs."""
    service, wanted = spec.data_service, service_mincpus(spec, group).get("mincpus")
    if service is None or wanted is None or not partition.node_cpus or "mincpus" in dict(spec.sbatch):
        return []  # (--sbatch mincpus=N: the user's own, which sbatch --test-only judges)
    roomy = sum(1 for cpus in partition.node_cpus if cpus >= wanted)
    if roomy >= group.node_range.least:
        return []
    return [f"--data-workers {service.asked} --data-cpus {service.cpus}: each node needs {wanted} CPU(s) for its "
            f"ranks and the {service_cpus(spec, group) // service.cpus} data worker(s) placed beside them, and "
            f"partition {partition.name} has {roomy} node(s) with that many (at most {max(partition.node_cpus)} "
            "CPUs a node); ask for fewer data workers or CPUs each, more nodes (the workers spread over them), put "
            f"them on a partition of their own (--data-partition P), or let them share the ranks' CPUs (--sbatch "
            f"mincpus={ranks_cpus(group)})"]


# The requests this process found Slurm would run: one `sbatch --test-only` is enough, however often it is asked.
_PASSED: set[JobRequest] = set()


def check_request(spec: JobRequest, env: Mapping[str, str]) -> None:
    """Raise JobSpecError naming the first thing a group's partition cannot give; return when Slurm would run it.
    A group given several partitions (`--partition a,b`) has each checked: one unknown is named, and the group is
    refused only when none of them can ever run it (Slurm starts it in whichever can, first)."""
    if spec in _PASSED:
        return
    check_image(spec)
    problems = []
    for group in spec.groups:
        problems += group_problems(spec, group, _partitions(group, env))
    if not problems and spec.dependency:
        problems = unknown_jobs(spec.dependency, SlurmClient.local(env))
    if not problems:
        refusal = test_only(spec, env)
        problems = [refusal] if refusal else []
    if problems:
        raise JobSpecError(problems[0])
    _PASSED.add(spec)


def before_submit(spec: JobRequest, env: Mapping[str, str], local: bool, dry_run: bool, slurm_here: bool) -> str | None:
    """What submit checks before a snapshot or a run folder is stored: --local's GPUs and image (this machine's), a
    dry run's image, and what Slurm would refuse (`slurm_here`: its commands are on PATH), a dry run's too, each in
    one line. Where Slurm itself does not answer, a dry run goes on: the warning line to say once its script shows."""
    if local:
        check_local_gpus(spec, env)
    if local or dry_run:  # (check_request checks it with the rest)
        check_image(spec, here=local)
    if local or not slurm_here:
        return None
    try:
        check_request(spec, env)
    except JobSpecError:
        raise
    except HpcTrainError as error:
        if not dry_run:
            raise
        return f"hpc-train submit: warning: Slurm's checks not run ({error})"
    return None


def check_local_gpus(spec: JobRequest, env: Mapping[str, str]) -> None:
    """--local: more GPUs than this machine has, refused in one line before a snapshot or a run folder is stored
    (the launcher would refuse it too, once the job had started)."""
    from hpc_train.injob.mock_srun import Step, gpu_environments, machine_gpus

    group = spec.groups[0]  # (as the job body's mock step: every node as the first group's)
    gpu_environments(Step.make(spec.nodes, group.tasks_per_node, job_id=0, gpus_per_node=group.gpus_per_node,
                               strategy=spec.strategy, num_ps=spec.num_ps), machine_gpus(env))


def check_image(spec: JobRequest, here: bool = False) -> None:
    """A container's image that is not there (a file or folder; a registry's name is Pyxis's to pull), or Pyxis for
    ranks run `here` (submit --local: no srun), in one line, before anything is stored or queued."""
    import os

    container = job_image(spec)  # (an image no runtime is known for: its one line)
    if container is None:
        return
    problem = image_problem(container, os.path.exists(container.image))
    if problem:
        raise JobSpecError(problem)
    if here and container.runtime == "pyxis":
        raise JobSpecError(f"--container {container.image}: Pyxis starts ranks in an image only under srun, and "
                           "--local runs them here; drop --local, or use an Apptainer or Charliecloud image")


def group_problems(spec: JobRequest, group: Group, partitions: list[Partition]) -> list[str]:
    """What keeps a group from ever running in any of its partitions (pure): none when one of them can run it,
    else the first partition's problems."""
    each = [limit_problems(spec, partition, group) for partition in partitions]
    return [] if not each or not all(each) else each[0]


def unknown_jobs(dependency: str, slurm: SlurmClient) -> list[str]:
    """A job the dependency names that Slurm knows nothing of (neither its controller nor its accounting), as one
    line: Slurm takes such a dependency as met and starts the job at once, even afterok, so a mistyped id would."""
    for job in dependency_jobs(dependency):
        if not slurm.show_job(job) and not (slurm.accounting([job]) or "").strip():
            return [f"--after/--dependency: Slurm knows no job {job} (neither queued nor in its accounting), and "
                    "would start this one at once; check the id (hpc-train list, squeue), or drop the dependency "
                    "if that job ended long ago"]
    return []


def test_only_options(spec: JobRequest) -> list[str]:
    """sbatch's options of the request, as `sbatch --test-only` takes them (a group's after another's, `:` between
    them, as sbatch takes a heterogeneous job; pure): asked here, or of each remote (submit --remote a,b)."""
    from hpc_train.spec.directives import data_component, directives

    blocks = [*(directives(spec, group) for group in spec.groups), *filter(None, [data_component(spec)])]
    asked = [[*([":"] if index else []), *_options({name: value for name, value in block.items()
                                                    if name not in ("job-name", "output", "open-mode", "requeue",
                                                                    "signal")})]
             for index, block in enumerate(blocks)]
    return [option for group in asked for option in group]


def test_only(spec: JobRequest, env: Mapping[str, str]) -> str | None:
    """`sbatch --test-only` with the request's options: None when the scheduler would run it, else why not."""
    options = test_only_options(spec)
    result = SlurmClient.local(env).test_only(options)
    if result.returncode == 0:
        return None
    reason = re.sub(r"^(sbatch: error: |allocation failure: )", "", last_words(result, f"exit code "
                                                                                          f"{result.returncode}"))
    return f"Slurm would not run this request ({reason}): {' '.join(options)}; ask for less (sinfo shows " \
           "the partitions and their nodes)"


def data_partition_problems(service: DataService, partitions: list[Partition]) -> list[str]:  # (cli's, at once)
    """The data workers' partition (`--data-partition P`) checked against the cluster's (pure): one line when it
    does not exist (none known: nothing to judge by)."""
    if not partitions or service.partition is None:
        return []
    found = find_partition(partitions, service.partition)
    if found is None:
        return [f"--data-partition {service.partition}: no such partition here; choose one of "
                f"{', '.join(partition.name for partition in partitions)}"]
    return []


def _partitions(group: Group, env: Mapping[str, str]) -> list[Partition]:
    """The partitions a group of the job may go to (each one named, else the default); none when there is nothing
    to judge by (sbatch --test-only still asks the scheduler). A controller that does not answer is one line now,
    not a minute's wait in sbatch."""
    if not SlurmClient.local(env).available("scontrol"):
        return []
    partitions = read_partitions(SlurmClient.local(env))
    if not partitions:
        return []
    if not group.partitions:
        default = find_partition(partitions, None)
        return [default] if default else []
    return [_named(group, name, partitions) for name in group.partitions]


def _named(group: Group, name: str, partitions: list[Partition]) -> Partition:
    chosen = find_partition(partitions, name)
    if chosen is None:
        listed = f" (of {group.partition})" if len(group.partitions) > 1 else ""
        raise JobSpecError(f"{group.option('partition')} {name}{listed}: no such partition here; choose "
                           f"{'among' if listed else 'one of'} {', '.join(partition.name for partition in partitions)}")
    return chosen


def _options(directives: Mapping[str, object]) -> list[str]:
    return [f"--{name}" if value is True else f"--{name}={value}" for name, value in directives.items()]
