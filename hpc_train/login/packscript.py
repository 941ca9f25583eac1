"""A packed sweep's batch script (`render --pack`, `submit --pack`): ONE job of the request's nodes, no array, whose
body (`hpc-train pack`, injob/pack/runner.py) runs the trials as steps, each on its share. The script writes the
base settings (config.yaml) and the plan (pack.json: each trial's values, the share, the command, the retries) into
the sweep's folder runs/NAME-JOBID/, each as a quoted here-document, in which the shell expands nothing (pure)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from hpc_train.config import TrainConfig
from hpc_train.login.script import code_lines, config_lines, job_config, job_image, search_spec
from hpc_train.runs.snapshot import JobCode
from hpc_train.spec.directives import directive_lines
from hpc_train.spec.pack import job_tasks_per_node, shares_in
from hpc_train.spec.request import JobRequest
from hpc_train.spec.sweep import Sweep


def render_pack(spec: JobRequest, train: TrainConfig, home: str, sweep: Sweep, runs_dir: str = "runs",
                command: Sequence[str] | None = None, max_parallel: int | None = None, batch_log: str | None = None,
                program: str = "hpc-train", code: JobCode | None = None) -> str:
    """The packed sweep's whole script, from templates/job.sbatch as every rendered job's: one job, no array, its
    body `hpc-train pack`; Slurm's warning to the batch shell (B:), which passes it on to every trial's step."""
    import shlex
    from string import Template

    from hpc_train.resources import resource

    config = job_config(spec, train)
    first = {**pack_directives(spec), **({"output": batch_log} if batch_log else {}),
             **({"signal": f"B:USR1@{spec.signal_seconds}"} if spec.signal_seconds else {}),
             **({"hold": True} if spec.hold else {})}
    return Template(resource("templates/job.sbatch").read_text()).substitute(
        summary=f"{pack_summary(spec, sweep, max_parallel)}, {spec.strategy}",
        directives="\n".join(directive_lines(spec, first)), home=shlex.quote(home), runs_dir=shlex.quote(runs_dir),
        job_name=shlex.quote(spec.name), run_folder='"${SLURM_JOB_NAME}-${SLURM_JOB_ID}"',  # (a pack needs Slurm)
        config_block=pack_block(spec, config, sweep, command, max_parallel),
        job_line="\n".join([*code_lines(code), f'exec {program} pack --run-dir "$run_dir"']))


def pack_plan(spec: JobRequest, config: TrainConfig, sweep: Sweep, command: Sequence[str] | None,
              max_parallel: int | None) -> dict[str, Any]:
    """pack.json: what the job body needs to run every trial (runs/packed.py names it)."""
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


def pack_directives(spec: JobRequest) -> dict[str, str | int | bool]:
    """What the pack's #SBATCH lines add to the group's: every share's ranks on a node, each rank's CPUs, and
    --no-kill: a node lost takes down the trials on it, not the whole allocation (Slurm's default)."""
    share = spec.share
    assert share is not None
    return {"ntasks-per-node": job_tasks_per_node(share), **({"cpus-per-task": share.cpus} if share.cpus else {}),
            "no-kill": True}


def pack_block(spec: JobRequest, config: TrainConfig, sweep: Sweep, command: Sequence[str] | None,
               max_parallel: int | None) -> str:
    """The script's lines that write config.yaml and pack.json into the sweep's folder."""
    from hpc_train.runs.packed import PLAN

    plan = json.dumps(pack_plan(spec, config, sweep, command, max_parallel), indent=1)
    return f"{config_lines(config)}\ncat > \"$run_dir/{PLAN}\" <<'HPC_TRAIN_PACK'\n{plan}\nHPC_TRAIN_PACK"


def pack_summary(spec: JobRequest, sweep: Sweep, max_parallel: int | None) -> str:
    """One line for people: the trials, the job, how many run at once, each trial's share."""
    share = spec.share
    assert share is not None
    at_once = min(shares_in(share, spec.nodes), max_parallel or len(sweep))
    each = f"{share.nodes} node(s)" if share.nodes > 1 else f"{share.gpus} GPU(s)" if share.gpus else \
        f"{share.cpus or 1} CPU(s)"
    return f"a packed sweep of {len(sweep)} trials in one job of {spec.nodes} node(s), {at_once} at once ({each} each)"
