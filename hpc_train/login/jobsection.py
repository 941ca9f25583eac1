"""A job YAML's `job:` section: options of the job request that render and submit read beside the training
settings (a flag given on the command line wins), each checked in one line. `hpc-train train` refuses the section
(config.py: JOB_KEY)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpc_train.config import JOB_KEY, ConfigError, read_yaml
from hpc_train.spec.sbatchoptions import after_problem, dependency_problem, option_problem

JOB_SECTION = {"ps_partition": "the partition the chief and ps run on, a heterogeneous job (--ps-partition)",
               "ps_nodes": "the nodes the chief and ps share, with ps_partition (--ps-nodes, default 1)",
               "after": "start when that job ends, whatever its end (--after JOBID)",
               "dependency": "when the job may start, in Slurm's syntax (--dependency SPEC)",
               "sbatch": "sbatch's options without a flag of their own, OPTION: VALUE (a flag: true) (--sbatch)",
               "pack": "the sweep as one job, its trials steps on shares of it: true, or {trial_gpus: K} / "
                       "{trial_nodes: M} / {trial_cpus: C} (--pack)",
               "container": "the image every rank runs in (--container IMAGE)",
               "container_runtime": "apptainer, pyxis or charliecloud (--container-runtime)",
               "nodes": "the nodes, N or a range MIN-MAX (--nodes)",
               "data_service": "the tf.data service: {workers: N, partition: P, cpus: C} (--data-workers N)"}
PACK_KEYS = ("trial_gpus", "trial_nodes", "trial_cpus")


def read_job_section(path: str | Path | None) -> dict[str, Any]:
    """The YAML file's `job:` section, checked: {} when there is none; one line for an unknown key or a value
    of the wrong kind. `after` comes back as text, `sbatch` as --sbatch's words (OPTION=VALUE, or OPTION)."""
    section = {} if path is None else read_yaml(Path(path)).get(JOB_KEY) or {}
    if not isinstance(section, Mapping):
        raise ConfigError(f"{path}: 'job:' must be a mapping of {', '.join(JOB_SECTION)}")
    for key in section:
        if key not in JOB_SECTION:
            raise ConfigError(f"{path}: job: {key!r} is not a job option; known: {', '.join(JOB_SECTION)}")
    partition, nodes = section.get("ps_partition"), section.get("ps_nodes")
    if partition is not None and (not isinstance(partition, str) or not partition.strip()):
        raise ConfigError(f"{path}: job: ps_partition {partition!r}: a partition's name, e.g. cpu")
    if nodes is not None and (isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1):
        raise ConfigError(f"{path}: job: ps_nodes {nodes!r}: a whole number of 1 or more")
    if section.get("data_service") is not None and not isinstance(section["data_service"], Mapping):
        raise ConfigError(f"{path}: job: data_service {section['data_service']!r}: {JOB_SECTION['data_service']}")
    for key in ("container", "container_runtime"):
        if section.get(key) is not None and (not isinstance(section[key], str) or not section[key].strip()):
            raise ConfigError(f"{path}: job: {key} {section[key]!r}: {JOB_SECTION[key]}")
    return {**section, **_slurm_keys(path, section), **_pack_keys(path, section.get("pack"))}


def _pack_keys(path: str | Path | None, pack: Any) -> dict[str, Any]:
    """`pack: true` or `pack: {trial_gpus: K}` as --pack's options (pack: false, or none: nothing)."""
    if pack is None or pack is False:
        return {"pack": None}
    if pack is True:
        return {"pack": True}
    if not isinstance(pack, Mapping) or set(pack) - set(PACK_KEYS):
        raise ConfigError(f"{path}: job: pack {pack!r}: true, or a mapping of {', '.join(PACK_KEYS)}")
    for key, value in pack.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{path}: job: pack: {key} {value!r}: a whole number of 1 or more")
    return {"pack": True, **pack}


def _slurm_keys(path: str | Path | None, section: Mapping[str, Any]) -> dict[str, Any]:
    """after, dependency and sbatch, checked as their flags are, each problem one line naming the file."""
    found: dict[str, Any] = {}
    after, dependency, options = section.get("after"), section.get("dependency"), section.get("sbatch")
    if after is not None:
        if isinstance(after, bool) or not isinstance(after, (int, str)) or after_problem(str(after)):
            raise ConfigError(f"{path}: job: after {after!r}: a job id (1234), an array's element (1234_5), or "
                              "several comma-separated")
        found["after"] = str(after)
    if dependency is not None and (not isinstance(dependency, str) or dependency_problem(dependency)):
        raise ConfigError(f"{path}: job: dependency {dependency!r}: Slurm's syntax, e.g. afterok:1234")
    if options is not None:
        if not isinstance(options, Mapping):
            raise ConfigError(f"{path}: job: sbatch: a mapping of sbatch's options, e.g. {{reservation: maint, "
                              "contiguous: true}")
        found["sbatch"] = [_word(path, str(name), value) for name, value in options.items() if value is not False]
    return found


def _word(path: str | Path | None, name: str, value: Any) -> str:
    """One `sbatch:` entry as --sbatch's word: OPTION=VALUE, or OPTION for `true` (a flag)."""
    if isinstance(value, (dict, list)) or value is None:
        raise ConfigError(f"{path}: job: sbatch: {name}: {value!r}: give a value (a flag: true)")
    text = None if value is True else str(value)
    problem = option_problem(name, text)
    if problem:
        raise ConfigError(f"{path}: job: sbatch: {problem.removeprefix('--sbatch ')}")
    return name if text is None else f"{name}={text}"
