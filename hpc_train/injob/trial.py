"""A sweep element's trial step: ask the sweep's study for this element's values before its ranks start.

The array's script runs it on the batch host, after it wrote the element's base config.yaml and search.json and
before the job body (`hpc-train trial --run-dir DIR [--command WORDS]`), so every rank of a multi-node element
gets the same values. It writes them into config.yaml (as a grid element's are) and `trial.sh`, which the script
sources: HPC_TRAIN_SWEEP_<KEY> for each value and, for a user's command, `element_command=(...)` with `{KEY}`
replaced, every word quoted. A requeued or retried element reads its trial back (runs/study.py): same number,
same values. Its own failure ends the element (exit 1): it cannot run without its values.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from hpc_train.config import ConfigError, load_config, to_dict
from hpc_train.errors import one_line
from hpc_train.injob.epilogue import QuietParser
from hpc_train.runs import study
from hpc_train.runs.state import write_text_atomically
from hpc_train.spec.sweep import SweepError, settings, substitute, value_text
from hpc_train.version import PREFIX

USAGE = "usage: hpc-train trial --run-dir DIR [--command WORDS]"
TRIAL_SCRIPT = "trial.sh"


def shell_lines(values: Mapping[str, Any], command_words: str | None) -> list[str]:
    """trial.sh: each value exported as HPC_TRAIN_SWEEP_<KEY>, and the element's command with `{KEY}` replaced,
    every word quoted (pure). `command_words`: the rank's command as shell words, `{KEY}` left in."""
    lines = [f"export HPC_TRAIN_SWEEP_{key.upper()}={shlex.quote(value_text(value))}" for key, value in values.items()]
    if command_words is not None:
        lines.append(f"element_command=({shlex.join(substitute(shlex.split(command_words), values))})")
    return lines


def prepare(run_dir: Path, command_words: str | None) -> dict[str, Any]:
    """Ask (or read back) the element's trial; write its config.yaml and trial.sh. The trial kept."""
    spec = study.read_json(run_dir / study.SEARCH_FILE)
    if not spec:
        raise SweepError(f"{run_dir / study.SEARCH_FILE}: missing; the array's script writes it before this step")
    config = load_config(run_dir / "config.yaml")
    keys = list(spec.get("keys") or spec.get("space", {}))
    # A grid element's values are already in its config and environment (the script's case); they are registered
    # as they are.
    fixed = grid_values(to_dict(config), keys, spec.get("space", {}), os.environ) \
        if spec.get("sampler") == "grid" else None
    kept = study.ask(run_dir, fixed)
    values = dict(kept["values"])
    write_text_atomically(run_dir / "config.yaml", yaml.safe_dump(to_dict(replace(config, **settings(values))),
                                                                  sort_keys=False))
    write_text_atomically(run_dir / TRIAL_SCRIPT, "\n".join(shell_lines(values, command_words)) + "\n")
    return kept


def grid_values(config: Mapping[str, Any], keys: Sequence[str], space: Mapping[str, Any],
                environ: Mapping[str, str]) -> dict[str, Any]:
    """A grid element's values (pure): a setting's from its config; a command's own key's, which no config holds,
    the choice its script exported as HPC_TRAIN_SWEEP_<KEY>."""
    values = {}
    for key in keys:
        if key in config:
            values[key] = config[key]
            continue
        exported = environ.get(f"HPC_TRAIN_SWEEP_{key.upper()}")
        chosen = [value for value in space.get(key, {}).get("choices", []) if value_text(value) == exported]
        if not chosen:
            raise SweepError(f"sweep key {key}: HPC_TRAIN_SWEEP_{key.upper()}={exported!r} is none of its values; "
                             "the array's script exports it before this step")
        values[key] = chosen[0]
    return values


def main(argv: Sequence[str] | None = None) -> int:
    parser = QuietParser(prog="hpc-train trial", add_help=False)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--command", default=None)
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    except ValueError:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        kept = prepare(args.run_dir, args.command)
    except (ConfigError, study.StudyMismatch) as error:  # (its search.json or config.yaml; a named study's way)
        print(f"{PREFIX}: trial: {error}", file=sys.stderr, flush=True)
        return 1
    except Exception as error:  # (Optuna's, SQLAlchemy's, the journal's, a file's: the study could not be asked)
        print(f"{PREFIX}: trial: {failure_line(args.run_dir, error)}", file=sys.stderr, flush=True)
        return 1
    shown = ", ".join(f"{key}={value_text(value)}" for key, value in kept["values"].items())
    print(f"{PREFIX}: trial {kept['number']} of study {kept['study']}: {shown}", file=sys.stderr, flush=True)
    return 0


def failure_line(run_dir: Path, error: BaseException) -> str:
    """Why the element could not get its trial, in one line: the study's storage named, and the fix."""
    url = study.read_json(run_dir / study.SEARCH_FILE).get("storage")
    try:
        where = url or str(study.sweep_folder(run_dir) / study.STUDY_FILE)
    except ValueError:  # (a folder that is no element's: said by prepare already)
        where = f"the sweep's {study.STUDY_FILE}"
    return (f"asking the study in {where} failed ({one_line(error)}); it must be readable and "
            "writable from this node: a shared filesystem for the journal, a database the nodes reach for "
            "--study-storage")


def settle_trial(run_dir: Path, code: int, goes_on: bool) -> int:
    """A sweep element with a trial in its study (runs/study.py): its end told to the study (COMPLETE with its
    objective, FAIL), unless the element goes on; a warning when that fails. `code`, the job's, returned."""
    from hpc_train.runs.study import read_trial, settle

    if not read_trial(run_dir) or goes_on:
        return code
    try:
        told = settle(run_dir, code)
    except Exception as error:  # (a study that cannot be reached must not change the job's code)
        print(f"{PREFIX}: warning: telling the study failed ({one_line(error)})", file=sys.stderr, flush=True)
        return code
    if told:
        print(f"{PREFIX}: trial {read_trial(run_dir).get('number')}: {told}", file=sys.stderr, flush=True)
    return code


def requeues_done(run_dir: Path) -> int:
    """How many times the element's job was requeued so far (its attempts' history)."""
    from hpc_train.runs import attempts

    return attempts.requeues_done(attempts.history(run_dir))
