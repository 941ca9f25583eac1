"""The job options `hpc-train render` and `hpc-train submit` share: parsed, then handed over with what this machine says
(the YAML, the image's path, the CPUs, the project folder, Slurm's word on a partition) to spec/options.py, which
builds the request once; the sweep and the plan (login/plan.py) made of them."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    from hpc_train.cli.studyoptions import add_study_arguments
    from hpc_train.config import JOB_STRATEGIES

    parser.add_argument("--nodes", "-N", default=None, metavar="N|MIN-MAX",
                        help="nodes; a range MIN-MAX: each attempt runs on as many as are free, up to MAX, never "
                             "fewer than MIN (YAML: job: {nodes: 2-4})")
    parser.add_argument("--gpus-per-node", type=int, default=0, metavar="G",
                        help="GPUs per node; one task per GPU unless --one-task-per-node (default 0: CPU tasks)")
    parser.add_argument("--one-task-per-node", action="store_true",
                        help="one task per node, mirroring over all its GPUs")
    parser.add_argument("--ntasks-per-node", type=int, default=1, metavar="T", help="CPU tasks per node when G = 0")
    parser.add_argument("--strategy", choices=JOB_STRATEGIES, default=None,
                        help=f"default: the YAML's strategy when it is one of these, else {JOB_STRATEGIES[0]}")
    parser.add_argument("--num-ps", type=int, default=None, metavar="K", help="default: the YAML's num_ps, else 1")
    parser.add_argument("--name", default=None, help="job name; results go to runs/NAME-JOBID/ (default: this "
                        "folder's name, as hpc-train init names the starter's job)")
    parser.add_argument("--partition", default=None, help="sbatch --partition; several, a,b: the job starts in "
                        "whichever can run it first (each checked before it is queued)")
    for option in ("account", "qos", "time", "mem", "constraint", "gres"):
        parser.add_argument(f"--{option}", default=None, help=f"sbatch --{option}")
    parser.add_argument("--ps-partition", default=None, metavar="NAME",
                        help="parameter_server: the chief and the ps on this (CPU) partition, no GPU, the workers on "
                             "--partition with their GPUs: one heterogeneous job (YAML: job: {ps_partition: NAME})")
    parser.add_argument("--ps-nodes", type=int, default=None, metavar="M",
                        help="with --ps-partition: the nodes the chief and ps share (default 1)")
    parser.add_argument("--cpus-per-task", type=int, default=None, metavar="C")
    parser.add_argument("--exclusive", action="store_true")
    parser.add_argument("--after", default=None, metavar="JOBID[,JOBID...]",
                        help="start when that job ends, whatever its end (Slurm's --dependency=afterany:JOBID; "
                             "success only: --dependency afterok:JOBID); an array's element: JOBID_I")
    parser.add_argument("--dependency", default=None, metavar="SPEC",
                        help="sbatch --dependency, in Slurm's syntax (afterok:1234, afternotok:1234, singleton, ...)")
    parser.add_argument("--sbatch", action="append", default=[], metavar="OPTION=VALUE",
                        help="any sbatch option without a flag here, in every group of the job (repeatable; a "
                             "flag alone: --sbatch contiguous); e.g. --sbatch reservation=maint --sbatch "
                             "exclude=node3 --sbatch mail-user=me@example.org --sbatch mail-type=END")
    add_container_arguments(parser, "run every rank in this image, the job body outside (docs/containers.md): a "
                                    ".sif or a sandbox (Apptainer), a .sqsh or a registry name (Pyxis), or "
                                    "--container-runtime's")
    parser.add_argument("--signal-seconds", type=int, default=120, metavar="S",
                        help="warn the tasks S seconds before the time limit: they checkpoint and requeue the job "
                             "(default 120; 0: no warning)")
    parser.add_argument("--max-retries", type=int, default=None, metavar="N",
                        help="retry a job whose step failed (a task died, hung or lost a peer; a node lost) up to N "
                             "times on other nodes, resuming from its last checkpoint (default 3; 0: never; same as "
                             "--set max_retries=N)")
    parser.add_argument("--hang-minutes", type=float, default=None, metavar="M",
                        help="end an attempt on which no rank made progress for M minutes, recording every rank's "
                             "stacks, and retry it (default: 20 times the longest gap between progress beats, at "
                             "least 10; 0: never; same as --set hang_minutes=M)")
    parser.add_argument("--retry-exit-codes", default=None, metavar="C,...",
                        help="your command's exit codes worth a retry (any other exit is its own verdict)")
    parser.add_argument("--config", default=None, metavar="FILE.yaml", help="training settings (hpc-train train)")
    parser.add_argument("--sweep", action="append", default=[], metavar="KEY=V1,V2,...|KEY=LOW:HIGH[:log]",
                        help="one job array: an element (a whole job) per combination of the values (repeatable; "
                             "any --set key; {KEY} in your command becomes the value); a range LOW:HIGH (:log) for "
                             "--search; or the YAML's sweep:")
    parser.add_argument("--search", choices=("grid", "random", "tpe", "cmaes"), default=None,
                        help="how a sweep's values are chosen: grid (every combination; the default when every key "
                             "lists values), or drawn by an Optuna sampler as each element starts (default tpe with "
                             "a range)")
    parser.add_argument("--trials", type=int, default=None, metavar="N", help="--search random|tpe|cmaes: N elements")
    add_study_arguments(parser)
    parser.add_argument("--prune", choices=("none", "halving", "median", "hyperband"), default=None,
                        help="an element of a sweep stops itself, its checkpoint kept, when Optuna's pruner says: "
                             "halving (the worse half at epochs 1, 2, 4, 8, ...), median, hyperband "
                             "(same as --set prune=NAME)")
    parser.add_argument("--max-parallel", type=int, default=None, metavar="K",
                        help="at most K elements of a sweep run at once (Slurm's --array=...%%K)")
    add_pack_arguments(parser)
    from hpc_train.cli.dataserviceoptions import add_data_service_arguments

    add_data_service_arguments(parser)
    parser.add_argument("--task", default=None, metavar="FILE.py|MODULE",
                        help="what to train: a task module (as hpc-train train --task); default: the built-in MNIST")
    parser.add_argument("--set", action="append", default=[], dest="overrides", metavar="KEY=VALUE")
    from hpc_train.cli.trackingoptions import add_tracking_arguments

    add_tracking_arguments(parser)
    from hpc_train.cli.bootstrap import add_command_arguments

    add_command_arguments(parser)
    parser.add_argument("--home", default=None, metavar="DIR",
                        help="what the job activates: a project root (its env/activate.sh) or a virtual "
                             "environment (its bin/activate); default: render, this checkout, else this "
                             "environment; submit, this very Python")


def add_container_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """--container IMAGE (`what` it does for this verb) and --container-runtime: submit's, render's, doctor's."""
    parser.add_argument("--container", default=None, metavar="IMAGE", help=what)
    parser.add_argument("--container-runtime", default=None, metavar="{apptainer,pyxis,charliecloud}",
                        help="the runtime of --container's image (default: the image says)")


def add_pack_arguments(parser: argparse.ArgumentParser) -> None:
    """--pack and its trial share (spec/pack.py)."""
    parser.add_argument("--pack", action="store_true", default=None,
                        help="a sweep as ONE job of --nodes N: its trials run inside it as separate steps, each on "
                             "its own share, the next started as one ends (YAML: job: {pack: true})")
    parser.add_argument("--trial-gpus", type=int, default=None, metavar="K",
                        help="--pack: each trial gets K GPUs of one node (default 1 where the nodes have GPUs)")
    parser.add_argument("--trial-nodes", type=int, default=None, metavar="M",
                        help="--pack: each trial gets M whole nodes (a multi-node trial)")
    parser.add_argument("--trial-cpus", type=int, default=None, metavar="C",
                        help="--pack on CPU-only nodes: each trial one task of C CPUs, --ntasks-per-node of them "
                             "on a node")


def job_request(args: argparse.Namespace, here: str | None = None):  # -> tuple[JobRequest, TrainConfig, str]
    """The options handed over, once, as (JobRequest, TrainConfig, home): the one request every path reads (submit,
    render, sweeps, --local, preflight, dry-run), built by spec/options.py of what this machine says (the YAML, the
    image, the CPUs, the project folder: `here`, else this directory's name, names the job); one line for what
    cannot be (HpcTrainError)."""
    from hpc_train.cli.dataserviceoptions import check_partition, check_service_ports
    from hpc_train.login.jobsection import read_job_section
    from hpc_train.spec.options import given, refuse_command_options, request_of, with_section
    from hpc_train.spec.request import project_name

    options = given(vars(args))
    refuse_command_options(options)
    train = job_settings(args)
    options = with_section(options, read_job_section(args.config), train.strategy, train.num_ps)
    spec = request_of(options, here or project_name(Path.cwd()), image_path(options["container"]), os.cpu_count() or 1)
    if spec.data_service is not None and spec.data_service.partition is not None:
        check_partition(spec.data_service)
    check_service_ports(spec)
    train = with_global_batch(spec, train, bool(options["command"]))
    _check_task_file(train.task)
    return spec, train, args.home or default_home()


def job_settings(args: argparse.Namespace):  # -> TrainConfig
    """The training settings: the YAML, then --set and the flags that are settings (--task, --max-retries,
    --prune, --hang-minutes, the tracking flags); tracking checked."""
    from hpc_train.cli.trackingoptions import check_tracking, tracking_from_here, tracking_overrides
    from hpc_train.config import data_dir_default, load_config

    retries = [f"max_retries={args.max_retries}"] if args.max_retries is not None else []
    retries += [f"prune={args.prune}"] if args.prune is not None else []
    retries += [f"hang_minutes={args.hang_minutes:g}"] if args.hang_minutes is not None else []
    train = load_config(args.config, [*([f"task={args.task}"] if args.task else []), *args.overrides, *retries,
                                      *tracking_overrides(args)], sweep_allowed=True,
                        data_dir=data_dir_default(os.environ))
    train = tracking_from_here(train)
    check_tracking(train, getattr(args, "subcommand", "") == "submit"  # (--local: the job says it, at once)
                   and not getattr(args, "dry_run", False) and not getattr(args, "local", False))
    return train


def with_global_batch(spec, train, command: bool):  # (JobRequest, TrainConfig, bool) -> TrainConfig
    """The trainer's: the same global batch at every size of a range (spec/request.py), said when it is rounded."""
    from hpc_train.config import replace as replace_config
    from hpc_train.spec.request import fixed_global_batch, global_batch_note

    if command:
        return train
    note = global_batch_note(spec, train.batch_size, train.global_batch)
    if note:
        print(f"hpc-train: note: {note}", file=sys.stderr)
    return replace_config(train, global_batch=fixed_global_batch(spec, train.batch_size, train.global_batch))


def image_path(image: str | None) -> str | None:
    """--container's image made absolute when it is a file or folder here (the job runs elsewhere: its snapshot);
    a registry's name (Pyxis pulls it) as it is."""
    from hpc_train.container.runtime import registry_name

    return image if image is None or (registry_name(image) and not Path(image).exists()) else \
        str(Path(image).expanduser().absolute())


def sweep_request(args: argparse.Namespace, train, spec):  # (Namespace, TrainConfig, JobRequest) -> Sweep | None
    """The sweep the options ask for (--sweep, or the YAML's sweep:), every element checked, for the job `spec`
    (job_request's); None for one job."""
    from hpc_train.config import read_sweep
    from hpc_train.errors import HpcTrainError
    from hpc_train.slurm.client import SlurmClient
    from hpc_train.spec.search import check_space
    from hpc_train.spec.sweep import JOB_KEYS, check, substitute

    section = read_sweep(args.config)
    if args.sweep and section is not None:
        raise HpcTrainError(f"--sweep and the sweep: section of {args.config}: give one of them")
    if not args.sweep and section is None:
        given = [name for name, unset in (("--pack", spec.pack is None), ("--max-parallel",
                 args.max_parallel is None), ("--prune", train.prune == "none"), ("--search", args.search is None),
                 ("--trials", args.trials is None)) if not unset]
        if given:
            raise HpcTrainError(f"{given[0]} applies to a sweep: add --sweep KEY=V1,V2,... (or KEY=LOW:HIGH)")
        return None
    if spec.heterogeneous:
        raise HpcTrainError("--ps-partition with a sweep: Slurm has no job arrays of heterogeneous jobs; submit "
                            "each element as a job of its own, or drop --ps-partition")
    if spec.components > 1:
        raise HpcTrainError("--data-partition with a sweep: the data service's own nodes make each element a "
                            "heterogeneous job, and Slurm has no job arrays of those; drop --data-partition (each "
                            "element's service runs beside its ranks), or submit the elements one by one")
    sweep = sweep_of(args, section)
    for key in sweep.keys:
        if key in JOB_KEYS:
            raise HpcTrainError(f"--sweep {key}: {JOB_KEYS[key]}")
    if args.max_parallel is not None and args.max_parallel < 1:
        raise HpcTrainError(f"--max-parallel {args.max_parallel}: must be 1 or more")
    slurm = SlurmClient.local(os.environ)
    limit = slurm.config_value("MaxArraySize") if slurm.available("scontrol") else None
    check(sweep, train, int(limit) if limit and limit.isdigit() else None, own_keys=bool(args.command))
    if sweep.search is not None:
        check_space(sweep.search, train)
        _check_sampler_installed(sweep.search.sampler)
    from hpc_train.cli.studyoptions import with_study

    sweep = with_study(args, sweep, train)
    for values in sweep.elements:
        if args.command:  # a {KEY} no sweep key defines is refused now
            substitute(args.command, values or dict.fromkeys(sweep.keys, 0))
    return sweep


def sweep_of(args: argparse.Namespace, section):  # -> Sweep
    """--sweep with --search and --trials, or the YAML's sweep: (grid, random or search). A command's sweep takes
    keys of its own (any key: the command names it as {KEY} or reads HPC_TRAIN_SWEEP_<KEY>); a trainer's, its
    settings only."""
    from hpc_train.errors import HpcTrainError
    from hpc_train.spec import search
    from hpc_train.spec.sweep import Sweep, from_yaml, grid, grid_axes

    own_keys = bool(args.command)
    if section is not None and (args.search is not None or args.trials is not None):
        raise HpcTrainError(f"--search and --trials with the sweep: section of {args.config}: give its search: "
                            "sampler and trials there")
    if isinstance(section, dict) and list(section) == ["search"]:
        found = search.from_yaml(section["search"], own_keys)
    elif section is not None:
        import secrets

        return from_yaml(section, own_keys, unseeded=secrets.randbelow(2**31))  # (as --search draws its seed at submit)
    else:
        found = search.from_options(args.sweep, args.search, args.trials, own_keys=own_keys)
        if found is None:
            return grid(grid_axes(args.sweep, own_keys))
    return Sweep(found.keys, tuple({} for _ in range(found.trials)), found)


def _check_sampler_installed(sampler: str) -> None:
    """CMA-ES is Optuna's wrapper of the cmaes package, which Optuna does not bring: refused now, not in a job."""
    import importlib.util

    from hpc_train.errors import HpcTrainError

    if sampler == "cmaes" and importlib.util.find_spec("cmaes") is None:
        raise HpcTrainError("--search cmaes needs the cmaes package, which is not installed: pip install cmaes (in "
                            "the environment the jobs run), or use --search tpe")


def _check_task_file(task: str) -> None:
    """A task FILE.py that is not there is refused now, not after the job waited in the queue."""
    from hpc_train.errors import HpcTrainError
    from hpc_train.training.usertask import is_file_spec

    if is_file_spec(task) and not Path(task).is_file():
        raise HpcTrainError(f"task {task}: no such file; give the task module's path (--task FILE.py), or a dotted "
                            "module name the nodes can import")


def job_plan(args: argparse.Namespace, spec, train, home: str, sweep, runs: Path = Path("runs"), code=None):
    """The job's plan (login/plan.py) from what job_request and sweep_request made of the options: render's and
    submit's alike, so that both print the same script."""
    from hpc_train.login.plan import JobPlan
    from hpc_train.login.snapshot_settings import settings_in_snapshot

    if code is not None:  # the settings as the job reads them, in its snapshot
        train = settings_in_snapshot(train, code)
    return JobPlan(spec, train, home=args.home, activates=home, runs=runs,
                   command=tuple(args.command) if args.command else None, code=code, sweep=sweep,
                   max_parallel=args.max_parallel if sweep is not None else None)


def default_home() -> str:
    """The checkout hpc-train runs from; installed from a wheel, the Python environment it is installed in."""
    import sys

    from hpc_train.resources import checkout_root

    root = checkout_root()
    return str(root) if root else sys.prefix
