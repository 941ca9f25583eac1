"""A job's options as given, and the request built of them once (pure: values in, a JobRequest out).

`Options` are what the command line says of the job (render's and submit's flags, by name), frozen; the YAML's `job:`
section goes under them (`with_section`: a flag given wins), and the training settings' strategy and num_ps under
both. `request_of` then builds the one JobRequest every path reads (submit, render, sweeps, --local, preflight,
dry-run): its group of nodes (or the heterogeneous job's two), the pack's share, the data service, the job's
dependency and sbatch options, every refusal one line. What needs this machine (the YAML file, the image on disk, the
CPUs here, Slurm's word) is the command line's to read first (cli/joboptions.py) and hand over as values.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from hpc_train.config import JOB_STRATEGIES
from hpc_train.errors import HpcTrainError
from hpc_train.spec.data_service import DataService, DataServiceError, from_settings
from hpc_train.spec.noderange import NodeRange, parse_nodes
from hpc_train.spec.pack import Pack, PackError
from hpc_train.spec.request import PS_PARTITION_WITHOUT_PS, Group, JobRequest, JobSpecError
from hpc_train.spec.sbatchoptions import after_dependency, after_problem, combined_problem, parse

# The job's options by name, as render and submit parse them (cli/joboptions.py: argparse's names, gpus_per_node,
# ps_partition, `sbatch` as --sbatch's words, `command` as the words after --), read-only; not given: None, or the
# flag's default. Submit's own (local, hold) are absent from render's: not given.
Options = Mapping[str, Any]
GROUP = ("gpus_per_node", "one_task_per_node", "ntasks_per_node", "partition", "constraint", "mem", "cpus_per_task",
         "exclusive", "gres")  # a Group's, in its order
JOB = ("account", "qos", "time", "container_runtime", "signal_seconds", "keras", "command_signal")  # a JobRequest's


def given(values: Mapping[str, Any]) -> Options:
    """The options handed over (argparse's namespace, as vars()), frozen; --sbatch's words and the command tuples."""
    return MappingProxyType({**values, "sbatch": tuple(values.get("sbatch") or ()),
                             "command": tuple(values["command"]) if values.get("command") else None})


def refuse_command_options(options: Options) -> None:
    """The options that apply to a user's command alone, given without one: one line."""
    if (options["keras"], options["command_signal"]) != ("auto", "USR1") and not options["command"]:
        raise HpcTrainError("--keras and --command-signal apply to your own command after --; the trainer always "
                            "uses tf-keras and checkpoints on USR1")
    if options["retry_exit_codes"] is not None and not options["command"]:
        raise HpcTrainError("--retry-exit-codes applies to your own command after --; the trainer's failures "
                            "worth a retry are known to it")


def with_section(options: Options, section: Mapping[str, Any], strategy: str, num_ps: int) -> Options:
    """One rule for what the job is: a flag given wins, else the YAML's job: section (login/jobsection.py read it),
    else its training settings' `strategy` (one of a job's) and `num_ps`. --after or --dependency given: neither of
    the YAML's; --sbatch's options after the YAML's, replacing one of the same name."""
    section = dict(section)
    if options["after"] is not None or options["dependency"] is not None:
        section = {key: value for key, value in section.items() if key not in ("after", "dependency")}
    named = {parse(text)[0] for text in options["sbatch"]}
    sbatch = (*(text for text in section.pop("sbatch", []) if parse(text)[0] not in named), *options["sbatch"])
    unset = {key: value for key, value in section.items() if options.get(key) is None}
    return MappingProxyType({
        **options, **unset, "sbatch": sbatch,
        "strategy": options["strategy"] or (strategy if strategy in JOB_STRATEGIES else JOB_STRATEGIES[0]),
        "num_ps": num_ps if options["num_ps"] is None else options["num_ps"]})


def request_of(options: Options, here: str, image: str | None, cpus: int) -> JobRequest:
    """The job request of the options (with the YAML's under them): `here`, the job's name when none is given (the
    project folder's); `image`, the container's image as the job will name it; `cpus`, this machine's (--local's
    range must start on them). One line for what cannot be."""
    nodes = node_range(options, cpus)
    group = Group(nodes.most, *(options[name] for name in GROUP), min_nodes=None if nodes.fixed else nodes.least)
    job_wide = dict(name=options["name"] if options["name"] is not None else here, container=image,
                    hold=bool(options.get("hold")), retry_exit_codes=exit_codes(options["retry_exit_codes"]),
                    **{name: options[name] for name in JOB}, pack=pack_of(options),
                    data_service=data_service_of(options), **slurm_options(options))
    return parameter_servers(options, group, job_wide)


def node_range(options: Options, cpus: int) -> NodeRange:
    """--nodes (or the YAML's job: nodes:) as a range; one line when it is missing or wrong, or when --local's
    range cannot start on this machine's `cpus`."""
    if options["nodes"] is None:
        raise HpcTrainError("--nodes N (or MIN-MAX) is required: how many nodes the job runs on (or job: nodes: in "
                            "the YAML)")
    nodes = parse_nodes(options["nodes"])
    gpus = options["gpus_per_node"]
    per_node = gpus and (1 if options["one_task_per_node"] else gpus) or options["ntasks_per_node"]
    if options.get("local") and not nodes.fixed and nodes.least * per_node > cpus:
        raise HpcTrainError(f"--nodes {nodes} with --local: every node runs here, and this machine's {cpus} CPU(s) "
                            f"cannot hold MIN {nodes.least} node(s) of {per_node} task(s); lower MIN, or drop --local")
    return nodes


def pack_of(options: Options) -> Pack | None:
    """The trial share --pack asks for; one line for --trial-* without --pack."""
    shares = [f"--{name.replace('_', '-')}" for name in ("trial_gpus", "trial_nodes", "trial_cpus")
              if options.get(name) is not None]
    if not options.get("pack"):
        if shares:
            raise PackError(f"{shares[0]} applies to a packed sweep: add --pack (and a --sweep)")
        return None
    if options.get("local"):
        raise PackError("--pack with --local: a packed sweep runs its trials as Slurm steps in one allocation; "
                        "drop --local (hpc-train cluster up gives a local Slurm)")
    return Pack(options["trial_gpus"], options["trial_nodes"], options["trial_cpus"])


def data_service_of(options: Options) -> DataService | None:
    """The data service the options and the YAML ask for; one line for a value that cannot be, or one that cannot
    run where the job runs. (Whether its partition exists is Slurm's word: cli/dataserviceoptions.py asks it.)"""
    said = [options.get(name) for name in ("data_workers", "data_partition", "data_cpus", "data_service")]
    service = from_settings(*said, options.get("config") or "the YAML")
    if service is not None and options.get("pack"):
        raise DataServiceError(f"--data-workers {service.asked} with --pack: a packed sweep's trials run as steps of "
                               "their own, without the job body's data service; drop --pack (a sweep's elements each "
                               "get one), or --data-workers")
    if service is not None and options.get("local"):
        raise DataServiceError(f"--data-workers {service.asked} with --local: the data service runs as Slurm steps "
                               "beside the ranks; drop --local (hpc-train cluster up gives a local Slurm), or "
                               "--data-workers")
    return service


def slurm_options(options: Options) -> dict[str, Any]:
    """--after or --dependency, and --sbatch, as the request's dependency and sbatch options; one line for what
    is not Slurm's syntax, or for them with --local (no Slurm there to wait or to read them)."""
    after, dependency = options["after"], options["dependency"]
    said = [name for name, value in (("--after", after), ("--dependency", dependency),
                                     ("--sbatch", options["sbatch"])) if value]
    if said and options.get("local"):
        raise JobSpecError(f"{said[0]} with --local: the job runs here at once, without Slurm to wait for another "
                           f"job or read sbatch's options; drop {said[0]}, or --local")
    problem = combined_problem(after, dependency) or (after is not None and after_problem(after))
    if problem:
        raise JobSpecError(problem)
    return dict(dependency=after_dependency(after) if after is not None else dependency,
                sbatch=tuple(parse(text) for text in options["sbatch"]))


def parameter_servers(options: Options, group: Group, job_wide: dict[str, Any]) -> JobRequest:
    """The job of one group; with --ps-partition, the heterogeneous one (chief and ps on that partition, `group`
    the workers). One line for what does not fit."""
    strategy, num_ps, partition, ps_nodes = (options[name] for name in ("strategy", "num_ps", "ps_partition",
                                                                        "ps_nodes"))
    if partition is None:
        if ps_nodes is not None:
            raise HpcTrainError("--ps-nodes applies with --ps-partition (the chief and ps on CPU nodes); add it")
        return JobRequest((group,), strategy=strategy, num_ps=num_ps, **job_wide)
    if strategy != "parameter_server":
        raise HpcTrainError(PS_PARTITION_WITHOUT_PS)
    if options.get("local"):
        raise HpcTrainError("--ps-partition with --local: a heterogeneous job runs under Slurm; drop --local "
                            "(hpc-train cluster up --partition cpu:node[1-2]:0 --partition gpu:node[3-4]:2 gives one)")
    return JobRequest.parameter_servers(group, partition, 1 if ps_nodes is None else ps_nodes, num_ps, **job_wide)


def exit_codes(text: str | None) -> tuple[int, ...]:
    """--retry-exit-codes 3,17 as (3, 17); one line for what is not a list of exit codes."""
    if text is None:
        return ()
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdigit() for part in parts):
        raise JobSpecError(f"--retry-exit-codes {text!r}: expected exit codes from 1 to 255, comma-separated "
                           "(e.g. 3,17)")
    return tuple(int(part) for part in parts)
