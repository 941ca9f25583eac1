"""A job's options as given, and the request built of them once (pure: values in, a JobRequest out).

`JobOptions` holds what the command line says of the job (render's and submit's flags), typed and frozen; the YAML's
`job:` section goes under it (`with_section`: a flag given wins), and the training settings' strategy and num_ps
under both. `request_of` then builds the one JobRequest every path reads (submit, render, sweeps, --local,
preflight, dry-run): its group of nodes (or the heterogeneous job's two), the pack's share, the data service, the
job's dependency and sbatch options, every refusal one line. What needs this machine (the YAML file, the image on
disk, the CPUs here, Slurm's word) is the command line's to read first (cli/joboptions.py) and hand over as values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from hpc_train.config import JOB_STRATEGIES
from hpc_train.errors import HpcTrainError
from hpc_train.spec.data_service import DataService, DataServiceError, from_settings
from hpc_train.spec.noderange import NodeRange, parse_nodes
from hpc_train.spec.pack import Pack, PackError
from hpc_train.spec.request import PS_PARTITION_WITHOUT_PS, Group, JobRequest, JobSpecError
from hpc_train.spec.sbatchoptions import after_dependency, after_problem, combined_problem, parse


@dataclass(frozen=True)
class JobOptions:
    """The job's options as the command line gives them (None: not given), then with the YAML's under them."""

    nodes: str | int | None = None
    gpus_per_node: int = 0
    one_task_per_node: bool = False
    ntasks_per_node: int = 1
    strategy: str | None = None
    num_ps: int | None = None
    name: str | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str | None = None
    mem: str | None = None
    constraint: str | None = None
    gres: str | None = None
    ps_partition: str | None = None
    ps_nodes: int | None = None
    cpus_per_task: int | None = None
    exclusive: bool = False
    after: str | None = None
    dependency: str | None = None
    sbatch: tuple[str, ...] = ()  # --sbatch's words, OPTION=VALUE or OPTION
    container: str | None = None
    container_runtime: str | None = None
    signal_seconds: int = 120
    retry_exit_codes: str | None = None  # as given: "3,17"
    keras: str = "auto"
    command_signal: str = "USR1"
    pack: bool | None = None
    trial_gpus: int | None = None
    trial_nodes: int | None = None
    trial_cpus: int | None = None
    data_workers: Any = None  # (text from a flag, or the YAML's number: spec/data_service.py reads either)
    data_partition: str | None = None
    data_cpus: Any = None
    data_service: Mapping[str, Any] | None = None  # the YAML's job: data_service: mapping
    command: tuple[str, ...] | None = None  # a user's command for every rank, instead of the trainer
    local: bool = False  # submit --local: the job runs here, without Slurm
    hold: bool = False  # submit --hold
    config: str | None = None  # the YAML file, as its refusals name it

    @classmethod
    def of(cls, given: Mapping[str, Any]) -> JobOptions:
        """The options from a mapping of every option given by name (argparse's namespace, as vars()); what it
        lacks keeps its default (render has no --local)."""
        values = {field.name: given[field.name] for field in fields(cls) if field.name in given}
        values["sbatch"] = tuple(values.get("sbatch") or ())
        values["command"] = tuple(values["command"]) if values.get("command") else None
        return cls(**values)


def refuse_command_options(options: JobOptions) -> None:
    """The options that apply to a user's command alone, given without one: one line."""
    if (options.keras, options.command_signal) != ("auto", "USR1") and not options.command:
        raise HpcTrainError("--keras and --command-signal apply to your own command after --; the trainer always "
                            "uses tf-keras and checkpoints on USR1")
    if options.retry_exit_codes is not None and not options.command:
        raise HpcTrainError("--retry-exit-codes applies to your own command after --; the trainer's failures "
                            "worth a retry are known to it")


def with_section(options: JobOptions, section: Mapping[str, Any], strategy: str, num_ps: int) -> JobOptions:
    """One rule for what the job is: a flag given wins, else the YAML's job: section (login/jobsection.py read it),
    else its training settings' `strategy` (one of a job's) and `num_ps`. --after or --dependency given: neither of
    the YAML's; --sbatch's options after the YAML's, replacing one of the same name."""
    section = dict(section)
    if options.after is not None or options.dependency is not None:
        section = {key: value for key, value in section.items() if key not in ("after", "dependency")}
    given = {parse(text)[0] for text in options.sbatch}
    sbatch = (*(text for text in section.pop("sbatch", []) if parse(text)[0] not in given), *options.sbatch)
    unset = {key: value for key, value in section.items() if getattr(options, key) is None}
    return replace(options, sbatch=sbatch, **unset,
                   strategy=options.strategy or (strategy if strategy in JOB_STRATEGIES else JOB_STRATEGIES[0]),
                   num_ps=num_ps if options.num_ps is None else options.num_ps)


def request_of(options: JobOptions, here: str, image: str | None, cpus: int) -> JobRequest:
    """The job request of the options (with the YAML's under them): `here`, the job's name when none is given (the
    project folder's); `image`, the container's image as the job will name it; `cpus`, this machine's (--local's
    range must start on them). One line for what cannot be."""
    nodes = node_range(options, cpus)
    group = Group(nodes.most, options.gpus_per_node, options.one_task_per_node, options.ntasks_per_node,
                  options.partition, options.constraint, options.mem, options.cpus_per_task, options.exclusive,
                  options.gres, min_nodes=None if nodes.fixed else nodes.least)
    job_wide = dict(name=options.name if options.name is not None else here, account=options.account,
                    qos=options.qos, time=options.time, container=image,
                    container_runtime=options.container_runtime, hold=options.hold,
                    signal_seconds=options.signal_seconds, keras=options.keras,
                    command_signal=options.command_signal, retry_exit_codes=exit_codes(options.retry_exit_codes),
                    pack=pack_of(options), data_service=data_service_of(options), **slurm_options(options))
    return parameter_servers(options, group, job_wide)


def node_range(options: JobOptions, cpus: int) -> NodeRange:
    """--nodes (or the YAML's job: nodes:) as a range; one line when it is missing or wrong, or when --local's
    range cannot start on this machine's `cpus`."""
    if options.nodes is None:
        raise HpcTrainError("--nodes N (or MIN-MAX) is required: how many nodes the job runs on (or job: nodes: in "
                            "the YAML)")
    nodes = parse_nodes(options.nodes)
    per_node = (options.gpus_per_node and (1 if options.one_task_per_node else options.gpus_per_node)
                or options.ntasks_per_node)
    if options.local and not nodes.fixed and nodes.least * per_node > cpus:
        raise HpcTrainError(f"--nodes {nodes} with --local: every node runs here, and this machine's {cpus} CPU(s) "
                            f"cannot hold MIN {nodes.least} node(s) of {per_node} task(s); lower MIN, or drop --local")
    return nodes


def pack_of(options: JobOptions) -> Pack | None:
    """The trial share --pack asks for; one line for --trial-* without --pack."""
    shares = [f"--{name.replace('_', '-')}" for name in ("trial_gpus", "trial_nodes", "trial_cpus")
              if getattr(options, name) is not None]
    if not options.pack:
        if shares:
            raise PackError(f"{shares[0]} applies to a packed sweep: add --pack (and a --sweep)")
        return None
    if options.local:
        raise PackError("--pack with --local: a packed sweep runs its trials as Slurm steps in one allocation; "
                        "drop --local (hpc-train cluster up gives a local Slurm)")
    return Pack(options.trial_gpus, options.trial_nodes, options.trial_cpus)


def data_service_of(options: JobOptions) -> DataService | None:
    """The data service the options and the YAML ask for; one line for a value that cannot be, or one that cannot
    run where the job runs. (Whether its partition exists is Slurm's word: cli/dataserviceoptions.py asks it.)"""
    service = from_settings(options.data_workers, options.data_partition, options.data_cpus, options.data_service,
                            options.config or "the YAML")
    if service is not None and options.pack:
        raise DataServiceError(f"--data-workers {service.workers} with --pack: a packed sweep's trials run as steps of "
                               "their own, without the job body's data service; drop --pack (a sweep's elements each "
                               "get one), or --data-workers")
    if service is not None and options.local:
        raise DataServiceError(f"--data-workers {service.workers} with --local: the data service runs as Slurm steps "
                               "beside the ranks; drop --local (hpc-train cluster up gives a local Slurm), or "
                               "--data-workers")
    return service


def slurm_options(options: JobOptions) -> dict[str, Any]:
    """--after or --dependency, and --sbatch, as the request's dependency and sbatch options; one line for what
    is not Slurm's syntax, or for them with --local (no Slurm there to wait or to read them)."""
    given = [name for name, value in (("--after", options.after), ("--dependency", options.dependency),
                                      ("--sbatch", options.sbatch)) if value]
    if given and options.local:
        raise JobSpecError(f"{given[0]} with --local: the job runs here at once, without Slurm to wait for another "
                           f"job or read sbatch's options; drop {given[0]}, or --local")
    problem = combined_problem(options.after, options.dependency) or (
        options.after is not None and after_problem(options.after))
    if problem:
        raise JobSpecError(problem)
    dependency = after_dependency(options.after) if options.after is not None else options.dependency
    return dict(dependency=dependency, sbatch=tuple(parse(text) for text in options.sbatch))


def parameter_servers(options: JobOptions, group: Group, job_wide: dict[str, Any]) -> JobRequest:
    """The job of one group; with --ps-partition, the heterogeneous one (chief and ps on that partition, `group`
    the workers). One line for what does not fit."""
    strategy, num_ps = options.strategy or JOB_STRATEGIES[0], 1 if options.num_ps is None else options.num_ps
    if options.ps_partition is None:
        if options.ps_nodes is not None:
            raise HpcTrainError("--ps-nodes applies with --ps-partition (the chief and ps on CPU nodes); add it")
        return JobRequest((group,), strategy=strategy, num_ps=num_ps, **job_wide)  # type: ignore[arg-type]
    if strategy != "parameter_server":
        raise HpcTrainError(PS_PARTITION_WITHOUT_PS)
    if options.local:
        raise HpcTrainError("--ps-partition with --local: a heterogeneous job runs under Slurm; drop --local "
                            "(hpc-train cluster up --partition cpu:node[1-2]:0 --partition gpu:node[3-4]:2 gives one)")
    return JobRequest.parameter_servers(group, options.ps_partition, 1 if options.ps_nodes is None
                                        else options.ps_nodes, num_ps, **job_wide)


def exit_codes(text: str | None) -> tuple[int, ...]:
    """--retry-exit-codes 3,17 as (3, 17); one line for what is not a list of exit codes."""
    if text is None:
        return ()
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdigit() for part in parts):
        raise JobSpecError(f"--retry-exit-codes {text!r}: expected exit codes from 1 to 255, comma-separated "
                           "(e.g. 3,17)")
    return tuple(int(part) for part in parts)
