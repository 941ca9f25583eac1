"""sbatch's own options on a job: when it may start (`--after JOBID`, `--dependency SPEC`) and any other option
without a flag of hpc-train's (`--sbatch OPTION=VALUE`: a reservation, nodes to avoid, a mail address), checked
here before they reach a script or Slurm (pure: each check returns its one-line problem, or None).

The names are checked against sbatch's own (Slurm 22.05 to 24.11) rather than the installed `sbatch --help`: a
script rendered here may be submitted elsewhere, and sbatch answers nothing without a cluster's configuration.
A value is Slurm's to judge: `sbatch --test-only` (preflight) asks the scheduler before anything is queued.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

VALUE, FLAG, EITHER = "value", "flag", "either"  # an option takes a value, none, or may take one

_VALUES = (
    "account acctg-freq array batch bb bbf begin chdir cluster-constraint clusters comment constraint container "
    "core-spec cores-per-socket cpu-freq cpus-per-gpu cpus-per-task deadline delay-boot dependency distribution "
    "error exclude export export-file extra extra-node-info gid gpu-bind gpu-freq gpus gpus-per-node "
    "gpus-per-socket gpus-per-task gres gres-flags hint input job-name kill-on-invalid-dep licenses mail-type "
    "mail-user mcs-label mem mem-bind mem-per-cpu mem-per-gpu mincpus network nodefile nodelist nodes ntasks "
    "ntasks-per-core ntasks-per-gpu ntasks-per-node ntasks-per-socket open-mode output partition power prefer "
    "priority profile qos reservation segment signal sockets-per-node switches thread-spec threads-per-core time "
    "time-min tmp tres-bind tres-per-task uid wait-all-nodes wckey wrap")
_FLAGS = ("contiguous help hold ignore-pbs no-requeue overcommit oversubscribe parsable quiet reboot requeue "
          "spread-job test-only usage use-min-nodes verbose version wait")
_EITHER = "exclusive get-user-env nice no-kill oom-kill-step propagate"
SBATCH_OPTIONS = {**dict.fromkeys(_VALUES.split(), VALUE), **dict.fromkeys(_FLAGS.split(), FLAG),
                  **dict.fromkeys(_EITHER.split(), EITHER)}

_LOGS = "hpc-train names the logs itself (slurm-NAME-JOBID.out, runs/NAME-JOBID/logs/)"
_REQUEUE = "hpc-train requeues the job itself (at the time-limit warning; a failure: --max-retries)"
_NOT_A_JOB = "not an option of a job"
_TASKS = "--ntasks-per-node (CPU tasks) or --gpus-per-node (a task per GPU)"
# What hpc-train sets itself, or has a flag for: what to use instead.
OWN = {
    "nodes": "--nodes", "ntasks": _TASKS, "ntasks-per-node": _TASKS, "ntasks-per-gpu": _TASKS,
    "gpus": "--gpus-per-node", "gpus-per-node": "--gpus-per-node", "gpus-per-task": "--gpus-per-node",
    "gres": "--gres", "cpus-per-task": "--cpus-per-task", "partition": "--partition (and --ps-partition)",
    "account": "--account", "qos": "--qos", "time": "--time", "mem": "--mem", "constraint": "--constraint",
    "exclusive": "--exclusive", "job-name": "--name", "array": "--sweep", "hold": "submit --hold",
    "dependency": "--dependency SPEC, or --after JOBID", "signal": "--signal-seconds (and --command-signal)",
    "output": _LOGS, "error": _LOGS, "open-mode": _LOGS, "requeue": _REQUEUE, "no-requeue": _REQUEUE,
    "wait": "submit returns at once; follow the job with hpc-train status JOBID or logs JOBID --follow",
    "wrap": _NOT_A_JOB, "test-only": "preflight runs sbatch --test-only itself", "parsable": _NOT_A_JOB,
    "help": _NOT_A_JOB, "usage": _NOT_A_JOB, "version": _NOT_A_JOB,
    "hetjob": "--ps-partition (hpc-train's one heterogeneous job)", "packjob": "--ps-partition",
}

_JOB = r"\d+(?:_\d+)?"  # a job, or an array's element (1234_5)
_AFTER = re.compile(rf"^{_JOB}(?:\s*,\s*{_JOB})*$")
_TYPES = ("after", "afterany", "afterok", "afternotok", "aftercorr", "afterburstbuffer")
_CONDITION = re.compile(rf"^(?:singleton|after:{_JOB}(?:\+\d+)?(?::{_JOB}(?:\+\d+)?)*|"
                        rf"(?:{'|'.join(_TYPES[1:])}):{_JOB}(?::{_JOB})*)$")


def parse(text: str) -> tuple[str, str | None]:
    """`--sbatch OPTION=VALUE` (or OPTION alone, a flag; a leading -- is sbatch's own spelling) as (name, value)."""
    name, equals, value = text.partition("=")
    return name.strip().removeprefix("--"), value if equals else None


def option_problem(name: str, value: str | None) -> str | None:
    """What is wrong with one `--sbatch` option: unknown to sbatch, hpc-train's own, or its value missing,
    unwanted or unsafe in a script (a line break ends an #SBATCH line)."""
    given = name + ("" if value is None else f"={value}")
    shown = f"--sbatch {given!r}" if _unsafe(given) else f"--sbatch {given}"  # (the message stays one line)
    if name in OWN:
        return f"{shown}: hpc-train sets it; use {OWN[name]}"
    kind = SBATCH_OPTIONS.get(name)
    if kind is None:
        if len(name) == 1:
            return f"{shown}: give sbatch's long option name (e.g. exclude=node3, not x=node3)"
        close = difflib.get_close_matches(name, [*SBATCH_OPTIONS, *OWN], n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        return f"{shown}: not an sbatch option; {hint}give a long option of sbatch's (man sbatch) without its --"
    if value is None and kind == VALUE:
        return f"{shown}: takes a value: --sbatch {name}=VALUE"
    if value is not None and kind == FLAG:
        return f"{shown}: takes no value: --sbatch {name}"
    if value is not None and (not value or _unsafe(value)):
        return f"{shown}: empty, or holds a line break or control character"
    return None


def _unsafe(text: str) -> bool:
    """What quoting cannot make safe: a line break ends an #SBATCH line."""
    return any(ord(char) < 32 or char == "\x7f" for char in text)


def options_problem(options: Sequence[tuple[str, str | None]]) -> str | None:
    """The first problem of a job's `--sbatch` options, each checked, and none given twice."""
    seen: set[str] = set()
    for name, value in options:
        problem = option_problem(name, value)
        if problem:
            return problem
        if name in seen:
            return f"--sbatch {name} given twice: give it once (a list of nodes is one value: exclude=node1,node2)"
        seen.add(name)
    return None


def after_problem(text: str) -> str | None:
    """`--after JOBID`: a job id (1234), an array's element (1234_5), or several comma-separated."""
    if _AFTER.match(text.strip()):
        return None
    return (f"--after {text!r}: expected a job id (1234), an array's element (1234_5), or several comma-separated "
            "(1234,1240)")


def after_dependency(text: str) -> str:
    """`--after` as Slurm's dependency: afterany, the other job's end, whatever the end (afterok: its success)."""
    return "afterany:" + ":".join(job.strip() for job in text.split(","))


def dependency_problem(spec: str) -> str | None:
    """`--dependency SPEC` in Slurm's syntax: conditions joined by `,` (all of them) or `?` (any of them)."""
    conditions = re.split(r"[,?]", spec)
    if ("," in spec and "?" in spec) or not all(_CONDITION.match(condition) for condition in conditions):
        return (f"--dependency {spec!r}: expected Slurm's TYPE:JOBID[:JOBID...] ({', '.join(_TYPES)}) or "
                "singleton, joined by , (all) or ? (any), e.g. afterok:1234")
    return None


def dependency_jobs(spec: str) -> list[str]:
    """The jobs a (valid) dependency names, in order, each once (pure)."""
    named = [job.partition("+")[0] for condition in re.split(r"[,?]", spec) for job in condition.split(":")[1:]]
    return list(dict.fromkeys(named))


def combined_problem(after: str | None, dependency: str | None) -> str | None:
    """--after and --dependency together: refused, with the one --dependency that says both."""
    if after is None or dependency is None:
        return None
    both = "" if "?" in dependency else f", both --dependency {after_dependency(after)},{dependency}"
    return f"--after and --dependency: give one (--after {after} is --dependency {after_dependency(after)}{both})"
