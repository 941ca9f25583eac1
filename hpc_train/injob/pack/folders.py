"""A packed sweep's folders: each trial's (runs/NAME-JOBID_I/, made ready as it starts: config.yaml with its
values, job.json, its study's trial asked) and the sweep's own job.json, for a pack started with sbatch."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpc_train.bootstrap.tmpdir import task_epilog
from hpc_train.runs.folders import element_id, run_folder


def trial_folder(run_dir: Path, plan: Mapping[str, Any], index: int) -> Path:
    """runs/NAME-JOBID_I: the element folder a job array's element I would have (runs/folders.py's naming)."""
    job_id = run_dir.name.removeprefix(f"{plan['name']}-")
    return run_folder(run_dir.parent, plan["name"], element_id(job_id, index))


def prepare_trial(run_dir: Path, plan: Mapping[str, Any], index: int, env: Mapping[str, str]) -> dict[str, Any]:
    """The trial's folder made ready as it starts: config.yaml with its values, job.json, and for a sweep with a
    study, its trial asked (an adaptive search draws its values now, from every trial told so far)."""
    import yaml

    from hpc_train.config import load_config, replace as with_values, to_dict
    from hpc_train.spec.sweep import settings
    from hpc_train.runs.state import write_text_atomically

    folder = trial_folder(run_dir, plan, index)
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    task_epilog(folder)  # srun's --task-epilog (srun_arguments names it)
    values = dict(plan["trials"][index])
    write_text_atomically(folder / "config.yaml", yaml.safe_dump(
        to_dict(with_values(load_config(run_dir / "config.yaml"), **settings(values))), sort_keys=False))
    if plan.get("search"):
        from hpc_train.injob.trial import prepare
        from hpc_train.runs.study import SEARCH_FILE

        write_text_atomically(folder / SEARCH_FILE, json.dumps(plan["search"]) + "\n")
        values = dict(prepare(folder, None)["values"])
    record_trial(run_dir, plan, folder)
    return values


def record_trial(run_dir: Path, plan: Mapping[str, Any], folder: Path) -> None:
    """The trial's job.json, unless submit wrote it: a packed sweep started with sbatch is followed all the same."""
    from hpc_train.runs.folders import JobRecord

    job_id, share = run_dir.name.removeprefix(f"{plan['name']}-"), plan["share"]
    JobRecord(element_id(job_id, folder.name.rpartition("_")[2]), plan["name"], str(folder), share["nodes"],
              share["nodes"] * share["tasks"], plan["strategy"], time.time(), plan.get("command"), sweep=job_id,
              pack=plan["pack"]).write_new()


def record_pack(run_dir: Path, plan: Mapping[str, Any], env: Mapping[str, str]) -> None:
    """The sweep's job.json, unless submit wrote it: a packed sweep started with sbatch (render --pack's script)
    is followed as a submitted one (status, report, cancel JOBID_I)."""
    from hpc_train.runs.folders import JobRecord

    job_id = run_dir.name.removeprefix(f"{plan['name']}-")
    nodes = int(env.get("SLURM_JOB_NUM_NODES") or 1)
    JobRecord(job_id, plan["name"], str(run_dir), nodes, int(env.get("SLURM_NTASKS") or nodes), plan["strategy"],
              time.time(), plan.get("command"), sweep=job_id, elements=[dict(values) for values in plan["trials"]],
              pack=plan["pack"]).write_new()
