"""The one writer: a job's sbatch script, of every kind, from templates/job.sbatch (values in, text out; the template
read from disk): a single job, a node range, a container, a heterogeneous job, a sweep's job array, and a packed sweep
(ONE job of the request's nodes, no array, whose body `hpc-train pack` runs the trials as steps from the plan the script
writes, pack.json).

Quoting happens here, at the render boundary: every value from the user reaches
the script through `shlex.quote`. The few raw shell pieces are the template's
own text. Directives are sorted, so a rendered script is deterministic and can
be compared with a golden file.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from string import Template
from typing import Any

import yaml

from hpc_train.config import TrainConfig, to_dict
from hpc_train.container.runtime import Container, choose_runtime
from hpc_train.errors import HpcTrainError
from hpc_train.runs.folders import RANK_LOG_PATTERN
from hpc_train.runs.snapshot import SNAPSHOTS, JobCode
from hpc_train.spec.directives import directive_lines
from hpc_train.spec.jobline import JobBody, script_line
from hpc_train.spec.pack import job_tasks_per_node, shares_in
from hpc_train.spec.request import Group, JobRequest
from hpc_train.spec.sweep import Sweep


def activation_script(home: str) -> Path:
    """What a job sources to get hpc-train's environment from `home` (--home): a checkout's env/activate.sh, or a
    virtual environment's bin/activate; one line when it is neither."""
    folder = Path(home).expanduser()
    for script in (folder / "env" / "activate.sh", folder / "bin" / "activate"):
        if script.is_file():
            return script.resolve()
    raise HpcTrainError(f"--home {home}: neither {folder / 'env' / 'activate.sh'} (a checkout of hpc-train, after "
                        f"env/setup.sh) nor {folder / 'bin' / 'activate'} (a virtual environment) is there; give the "
                        "project root or the environment the job should use")


def job_image(request: JobRequest) -> Container | None:
    """The container every rank runs in, its runtime chosen from the image unless named (a folder here reads as a
    sandbox: the one look at the disk, which the request itself, pure, does not take); None: none."""
    if request.container is None:
        return None
    return choose_runtime(request.container, request.container_runtime, Path(request.container).is_dir())


def job_config(spec: JobRequest, train: TrainConfig) -> TrainConfig:
    """The training config the job runs: its strategy and ps count come from the request."""
    return replace(train, strategy=spec.strategy, num_ps=spec.num_ps)


def render_script(spec: JobRequest, train: TrainConfig, home: str, runs_dir: str = "runs",
                  template: Path | None = None, command: Sequence[str] | None = None,
                  sweep: Sweep | None = None, max_parallel: int | None = None, batch_log: str | None = None,
                  program: str = "hpc-train", code: JobCode | None = None) -> str:
    """The whole sbatch script of any job kind, from templates/job.sbatch. `home` is the project root whose
    env/activate.sh the job sources; `command`: the user's own command for every task, instead of the trainer;
    `sweep`: one job array, an element per set of values (each a whole job of `spec`: its own run folder, config,
    retries), at most `max_parallel` running at once; with the request's `pack`, ONE job instead, whose body
    (`hpc-train pack`) runs the sweep's trials as steps, each on its share (pack_block). `batch_log`: the batch
    script's log (sbatch --output), where the default, in the directory sbatch runs in, will not do. `program`: how
    the job starts hpc-train (shell text): the activated environment's `hpc-train`, or `PYTHON -m hpc_train` for
    submit's own Python (with a container, the body runs each rank's in the image: injob/contained.py). `code`: the
    snapshot the job runs in (code_lines)."""
    config = job_config(spec, train)
    packed = sweep is not None and spec.pack is not None
    # A held job (submit --hold) starts after scontrol release (render has no --hold: people hold by hand).
    first = {**(pack_directives(spec) if packed else array_directives(sweep, max_parallel)),
             **({"output": batch_log} if batch_log else {}), **({"hold": True} if spec.hold else {})}
    from hpc_train.resources import resource

    return Template((template or resource("templates/job.sbatch")).read_text()).substitute(
        summary=f"{job_summary(spec, sweep, max_parallel)}, {spec.strategy}",
        directives="\n".join(directive_lines(spec, first)),
        home=shlex.quote(home),
        runs_dir=shlex.quote(runs_dir),
        job_name=shlex.quote(spec.name),
        run_folder=run_folder_text(sweep, packed),
        config_block=settings_block(spec, config, sweep, command, max_parallel, program),
        job_line="\n".join([*code_lines(code), job_line(spec, config, command, program, sweep, packed)]),
    )


def job_summary(spec: JobRequest, sweep: Sweep | None, max_parallel: int | None) -> str:
    """The job in words, for the script's header: each group's nodes and tasks, or a pack's trials."""
    if sweep is not None and spec.pack is not None:
        return pack_summary(spec, sweep, max_parallel)
    return " + ".join(group_summary(group) for group in spec.groups)


def settings_block(spec: JobRequest, config: TrainConfig, sweep: Sweep | None, command: Sequence[str] | None,
                   max_parallel: int | None, program: str) -> str:
    """The script's lines that write the job's settings into its run folder: its config.yaml, each element's
    (a sweep's), or the base settings and the trials' plan (a pack's)."""
    if sweep is None:
        return config_lines(config)
    if spec.pack is not None:
        return pack_block(spec, config, sweep, command, max_parallel)
    return sweep_lines(spec, config, sweep, command, program)


def array_directives(sweep: Sweep | None, max_parallel: int | None) -> dict[str, str]:
    """A sweep's #SBATCH array (at most `max_parallel` elements at once) and each element's log; none for a job."""
    if sweep is None:
        return {}
    return {"array": f"0-{len(sweep) - 1}" + (f"%{max_parallel}" if max_parallel else ""),
            "output": "slurm-%x-%A_%a.out"}


def run_folder_text(sweep: Sweep | None, packed: bool) -> str:
    """The run folder's name, as the script's shell makes it from Slurm's variables."""
    if packed:  # (a pack needs Slurm)
        return '"${SLURM_JOB_NAME}-${SLURM_JOB_ID}"'
    if sweep is not None:
        return '"${SLURM_JOB_NAME}-${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"'
    # Without Slurm (bash THIS_FILE) the job runs here, on the mock launcher, in a folder named as jobline's.
    return '"${SLURM_JOB_NAME:-$job_name}-${SLURM_JOB_ID:-local-$(date +%Y%m%d-%H%M%S)}"'


def job_line(spec: JobRequest, config: TrainConfig, command: Sequence[str] | None, program: str,
             sweep: Sweep | None, packed: bool) -> str:
    """The script's last line: the job body (`hpc-train job ...`, its ranks' command), or a pack's (`hpc-train
    pack`, which reads its plan, pack.json)."""
    if packed:
        return f'exec {program} pack --run-dir "$run_dir"'
    ranks = task_command(spec, config, command, program) if sweep is None or not command else \
        '"${element_command[@]}"'
    return script_line(program, '"$run_dir"', job_body(spec, config, command), ranks,
                       output=f'"$run_dir/{RANK_LOG_PATTERN}"')


def code_lines(code: JobCode | None) -> list[str]:
    """The script's lines before the job body that make the job run its snapshot, every attempt: the ranks are told
    where it was submitted from and the snapshot's root, and start in the snapshot's copy of that directory (the
    run folder's path is absolute). A snapshot deleted since ends the attempt in one line, never runs what is on
    disk now."""
    if code is None:
        return []
    snapshot = code.snapshot
    exports = " ".join(f"{name}={shlex.quote(value)}" for name, value in code.environment().items())
    gone = f"hpc-train: the code snapshot this job runs ({SNAPSHOTS}/{snapshot.digest}) is gone; resubmit the job"
    return [f"export {exports}", f"cd {shlex.quote(str(snapshot.workdir))} || {{ echo {shlex.quote(gone)} >&2; exit 1; }}"]


def group_summary(group: Group) -> str:
    """A group in words, for the script's header."""
    if group.ntasks is not None:
        where = f" on {group.partition}" if group.partition else ""
        return f"{', '.join(group.roles)}: {group.ntasks} task(s) on {group.nodes} node(s){where}, no GPU"
    return f"{group.node_range} node(s) x {group.tasks_per_node} task(s), {group.gpus_per_node} GPU(s) per node"


def job_body(spec: JobRequest, config: TrainConfig, command: Sequence[str] | None) -> JobBody:
    """What the job body does for this request: its step's tasks (the mock launcher's: every node as the first
    group's; a range's, its group's, the last), and how its failures are retried. Its run folder is the script's to
    say (script_line's word)."""
    per_node = spec.groups[-1 if spec.ranged else 0].tasks_per_node
    return JobBody(Path("."), spec.strategy, spec.nodes, per_node, config.max_retries,
                   tuple(spec.retry_exit_codes), bool(command), hang_minutes=config.hang_minutes,
                   track=config.track, tracking_uri=config.tracking_uri, experiment=config.experiment,
                   gpus_per_node=spec.groups[0].gpus_per_node, num_ps=spec.num_ps, container=job_image(spec),
                   node_range=str(spec.groups[-1].node_range) if spec.ranged else None,
                   data_service=spec.data_service)


def config_lines(config: TrainConfig) -> str:
    """The job's settings into its run folder: a quoted here-document, in which the shell expands nothing."""
    return f"cat > \"$run_dir/config.yaml\" <<'HPC_TRAIN_CONFIG'\n{yaml.safe_dump(to_dict(config), sort_keys=False)}" \
           "HPC_TRAIN_CONFIG"


def sweep_lines(spec: JobRequest, config: TrainConfig, sweep: Sweep, command: Sequence[str] | None,
                program: str = "hpc-train") -> str:
    """Each array element's settings (and command, `{KEY}` replaced), chosen by SLURM_ARRAY_TASK_ID; its values
    exported as HPC_TRAIN_SWEEP_<KEY>, its index as HPC_TRAIN_TRIAL. A sweep with a study (a search, or pruning)
    then asks it for the element's trial: an adaptive search's values are drawn there (study_lines)."""
    if sweep.search is not None:
        return "\n".join(['export HPC_TRAIN_TRIAL="$SLURM_ARRAY_TASK_ID"', config_lines(config),
                          *study_lines(spec, config, sweep, command, program)])
    return grid_lines(spec, config, sweep, command) + (
        "\n" + "\n".join(study_lines(spec, config, sweep, None, program)) if config.prune != "none" else "")


def search_spec(config: TrainConfig, sweep: Sweep) -> dict:
    """The element's search.json: how its trial is drawn (runs/study.py), and the pruner its epochs report to."""
    from hpc_train.runs.objective import minimised

    if sweep.search is not None:
        drawn = sweep.search.as_json()
    else:  # a grid's (or a random sweep's) values are the script's; the study holds each key's as one choice
        drawn = {"sampler": "grid", "seed": 0, "space": {
            key: {"choices": list(dict.fromkeys(values[key] for values in sweep.elements))} for key in sweep.keys}}
    return {**drawn, "keys": list(sweep.keys), "prune": config.prune, "epochs": config.epochs,
            "objective": config.objective, "minimize": minimised(config.objective or "val_accuracy"),
            "storage": sweep.storage, "study": sweep.study}


def study_lines(spec: JobRequest, config: TrainConfig, sweep: Sweep, command: Sequence[str] | None,
                program: str) -> list[str]:
    """search.json (a quoted here-document), the trial step (its values into config.yaml and trial.sh), then
    trial.sh sourced: the values exported and, for a command, the element's command."""
    import json

    words = f" --command {shlex.quote(task_command(spec, config, command))}" if command else ""
    # Written beside it, then renamed into place: a requeued element writes it again, and its readers (the trial
    # step, the chief's reports) must never find half of it.
    return [f"cat > \"$run_dir/.search.json.tmp\" <<'HPC_TRAIN_SEARCH'\n{json.dumps(search_spec(config, sweep))}\n"
            "HPC_TRAIN_SEARCH", 'mv -f "$run_dir/.search.json.tmp" "$run_dir/search.json"',
            f'{program} trial --run-dir "$run_dir"{words}', 'source "$run_dir/trial.sh"']


def grid_lines(spec: JobRequest, config: TrainConfig, sweep: Sweep, command: Sequence[str] | None) -> str:
    """A grid's elements, each its values in a case of SLURM_ARRAY_TASK_ID."""
    from hpc_train.config import replace as with_values
    from hpc_train.spec.sweep import settings, substitute, value_text

    lines = ['export HPC_TRAIN_TRIAL="$SLURM_ARRAY_TASK_ID"', 'case "$SLURM_ARRAY_TASK_ID" in']
    for index, values in enumerate(sweep.elements):
        exports = " ".join(f"HPC_TRAIN_SWEEP_{key.upper()}={shlex.quote(value_text(value))}"
                           for key, value in values.items())
        lines += [f"{index})", f"  export {exports}"]
        if command:
            words = task_command(spec, config, substitute(command, values))
            lines.append(f"  element_command=({words})")
        lines += [config_lines(with_values(config, **settings(values))), "  ;;"]
    lines += [f'*) echo "hpc-train: array task $SLURM_ARRAY_TASK_ID is not an element of this sweep '
              f'(0-{len(sweep) - 1})" >&2; exit 2 ;;', "esac"]
    return "\n".join(lines)


def task_command(spec: JobRequest, config: TrainConfig, command: Sequence[str] | None,
                 program: str = "hpc-train") -> str:
    """What srun starts on every task: the trainer, or the user's command supervised (quoted word by word).
    `program` is how the rank starts hpc-train (shell text): the job environment's hpc-train, or PYTHON -m hpc_train."""
    if not command:
        return f'{program} train --config "$run_dir/config.yaml" --output-dir "$run_dir"'
    from hpc_train.injob.supervisor import CommandJob, supervised_arguments

    job = CommandJob(tuple(command), spec.strategy, spec.num_ps, config.max_requeues, spec.keras, spec.command_signal)
    return f"{program} {shlex.join(supervised_arguments(job))}"


def pack_directives(spec: JobRequest) -> dict[str, str | int | bool]:
    """What a packed sweep's #SBATCH lines add to the group's: every share's ranks on a node, each rank's CPUs,
    --no-kill (a node lost takes down the trials on it, not the whole allocation: Slurm's default), and Slurm's
    warning to the batch shell (B:), which passes it on to every trial's step."""
    share = spec.share
    assert share is not None
    return {"ntasks-per-node": job_tasks_per_node(share), **({"cpus-per-task": share.cpus} if share.cpus else {}),
            "no-kill": True, **({"signal": f"B:USR1@{spec.signal_seconds}"} if spec.signal_seconds else {})}


def pack_block(spec: JobRequest, config: TrainConfig, sweep: Sweep, command: Sequence[str] | None,
               max_parallel: int | None) -> str:
    """A packed sweep's lines that write config.yaml and pack.json (pack_plan) into the sweep's folder
    runs/NAME-JOBID/, each a quoted here-document, in which the shell expands nothing."""
    import json

    from hpc_train.runs.packed import PLAN

    plan = json.dumps(pack_plan(spec, config, sweep, command, max_parallel), indent=1)
    return f"{config_lines(config)}\ncat > \"$run_dir/{PLAN}\" <<'HPC_TRAIN_PACK'\n{plan}\nHPC_TRAIN_PACK"


def pack_plan(spec: JobRequest, config: TrainConfig, sweep: Sweep, command: Sequence[str] | None,
              max_parallel: int | None) -> dict[str, Any]:
    """pack.json: what the pack's body (injob/pack/runner.py) needs to run every trial (runs/packed.py names it)."""
    share = spec.share
    assert share is not None and spec.pack is not None
    study = sweep.search is not None or config.prune != "none"
    return {"name": spec.name, "trials": [dict(values) for values in sweep.elements],
            "search": search_spec(config, sweep) if study else None,
            "command": list(command) if command else None, "strategy": spec.strategy, "num_ps": spec.num_ps,
            "max_requeues": config.max_requeues, "keras": spec.keras, "command_signal": spec.command_signal,
            "max_retries": config.max_retries, "retry_exit_codes": list(spec.retry_exit_codes),
            "max_parallel": max_parallel, "share": asdict(share),
            "hang_minutes": config.hang_minutes, "track": config.track, "tracking_uri": config.tracking_uri,
            "experiment": config.experiment, "container": asdict(image) if (image := job_image(spec)) else None,
            "pack": spec.pack.as_json()}


def pack_summary(spec: JobRequest, sweep: Sweep, max_parallel: int | None) -> str:
    """A packed sweep in one line for people: the trials, the job, how many run at once, each trial's share."""
    share = spec.share
    assert share is not None
    at_once = min(shares_in(share, spec.nodes), max_parallel or len(sweep))
    each = f"{share.nodes} node(s)" if share.nodes > 1 else f"{share.gpus} GPU(s)" if share.gpus else \
        f"{share.cpus or 1} CPU(s)"
    return f"a packed sweep of {len(sweep)} trials in one job of {spec.nodes} node(s), {at_once} at once ({each} each)"
