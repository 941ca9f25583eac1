"""The `hpc-train` command: one module per subcommand, `main(argv) -> int` for tests.

Each subcommand module has `add_arguments(parser)` and `run(args) -> int`
and imports its heavy dependencies inside `run`, so `hpc-train --help` never
loads TensorFlow. Everything after a bare `--` is the subcommand's `command`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from hpc_train.errors import HpcTrainError, report
from hpc_train.version import version_line

# `hpc-train --help` must start fast: `typing` alone costs milliseconds we avoid at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

# Subcommand -> (its module in hpc_train.cli, one line of help). Only the subcommand being
# run is imported, and each keeps its heavy imports inside run(): `hpc-train --help` stays fast. A module is named
# for its verb, but `list` and `report` (a submodule binds its name in this package, where `list` is the builtin
# and `report` errors.report): recent_jobs and compare_runs say what they hold.
SUBCOMMANDS = {
    "submit": ("submit", "submit a training job to Slurm (or run it here with --local)"),
    "status": ("status", "show a job's state, nodes, elapsed time and last progress line"),
    "logs": ("logs", "print (or follow) a job's log for one rank"),
    "cancel": ("cancel", "cancel a job"),
    "list": ("recent_jobs", "list recent jobs from the job folders here"),
    "report": ("compare_runs", "compare a sweep's runs: sorted by the objective, the best named, a CSV and a plot"),
    "render": ("render", "write a standalone sbatch script for a training job"),
    "init": ("init", "write a starter project: a task module, its settings and an sbatch script"),
    "train": ("train", "train a task, MNIST or your own (none, mirrored, multiworker or parameter_server)"),
    "bootstrap": ("bootstrap", "export TF_CONFIG and GPU binding for this Slurm task, then run a command"),
    "launch": ("launch", "start tasks locally with the environment srun would give them (mock Slurm)"),
    "cluster": ("cluster", "run a real Slurm cluster on this machine (up, down, status, env)"),
    "doctor": ("doctor", "check a cluster before you queue: Slurm, accounting, GPUs, a 2-node step"),
    "data": ("data", "stage MNIST for offline compute nodes (hpc-train data fetch --dest DIR)"),
    "track": ("track", "upload a job's run folder to MLflow (hpc-train track sync ID), for offline nodes"),
    "bench": ("bench", "measure speed against baselines; figures into BENCHMARKS.md"),
    "site": ("site", "for administrators: Slurm's Prolog and Epilog that keep a job's ports to its nodes"),
    "remote": ("remote", "name a cluster's login node reached over ssh (add, list, remove, check) for --remote"),
    "pull": ("pull", "copy a job's or sweep's run folders from a remote into ./runs/"),
}
# Verbs that take --remote NAME (hpc_train.cli.forwarding): they then run on the remote's login node.
REMOTE_VERBS = ("submit", "status", "logs", "cancel", "list", "report")
# Verbs of a job id that follow it, without --remote, to the remote this machine sent it to (hpc_train/remote/sent.py).
FOLLOWED = ("status", "logs", "cancel", "report")
# Run by the batch scripts hpc-train writes and ships, not by people: not in --help. `job` is the job body
# (hpc_train/injob/body.py) every script runs; `prologue` and `epilogue`, what scripts written before it run;
# `trial`, a sweep element's ask of its study before the body (injob/trial.py); `pack`, a packed sweep's body
# (injob/pack/runner.py).
# Verb -> its module in hpc_train.injob.
HIDDEN = {"job": "body", "prologue": "prologue", "epilogue": "epilogue", "trial": "trial", "pack": "pack.runner"}


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line, as all our errors are."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's formatter, sized without importing shutil (a few ms of start-up)."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=_terminal_columns() - 2, max_help_position=30)


def _terminal_columns() -> int:
    """COLUMNS if it is a number, else the terminal's width, else 80 (shutil's rule)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 20:
        return int(columns)
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns
    except (AttributeError, OSError, ValueError):  # no terminal, or stdout closed
        return 80


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    """The parser; only the `selected` subcommand gets its arguments (the rest cost start-up for nothing)."""
    parser = OneLineParser(prog="hpc-train", formatter_class=HelpFormatter,
                           description="Distributed TensorFlow training on Slurm clusters.")
    parser.add_argument("--version", action="version", version=version_line())
    subparsers = parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True,
                                       parser_class=OneLineParser)
    for name, (module_name, help_line) in SUBCOMMANDS.items():
        sub = subparsers.add_parser(name, help=help_line, formatter_class=HelpFormatter)
        if name == selected:
            module = importlib.import_module(f"hpc_train.cli.{module_name}")
            sub.description = module.__doc__
            module.add_arguments(sub)
            if name in REMOTE_VERBS:
                from hpc_train.cli.forwarding import add_remote_argument

                add_remote_argument(sub)
            sub.set_defaults(run=module.run)
    return parser


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """Split at the first bare `--`: our options before it, the user's command after."""
    argv = list(argv)
    if "--" not in argv:
        return argv, None
    at = argv.index("--")
    return argv[:at], argv[at + 1:]


# The subcommands that take a command after `--`.
TAKE_A_COMMAND = ("bootstrap", "launch", "submit", "render")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] and argv[0] in HIDDEN:  # `hpc-train job ... -- COMMAND`, `hpc-train epilogue STEP_EXIT_CODE ...`
        return importlib.import_module(f"hpc_train.injob.{HIDDEN[argv[0]]}").main(argv[1:])
    options, command = split_command(argv)
    selected = next((option for option in options if not option.startswith("-")), None)
    parser = build_parser(selected)
    args = parser.parse_args(options)
    if command is not None and args.subcommand not in TAKE_A_COMMAND:
        parser.error(f"{args.subcommand} takes no command after --; only {', '.join(TAKE_A_COMMAND)} do")
    if command is not None and not command:
        parser.error(f"{args.subcommand}: nothing after --; give the command, e.g. -- python train.py")
    args.command = command
    try:
        remote = (getattr(args, "remote", None) or os.environ.get("HPC_TRAIN_REMOTE")
                  if args.subcommand in REMOTE_VERBS else None)
        if not remote and args.subcommand in FOLLOWED and getattr(args, "job", None):
            from hpc_train.remote.sent import where

            remote = where(args.job, os.environ)  # the remote this machine's latest submission of that id went to
        if remote:  # the verb runs on the remote's login node, not here
            from hpc_train.cli.forwarding import run_remote

            return run_remote(args, remote, options, os.environ)
        code = int(args.run(args))
        sys.stdout.flush()  # a reader that left (`| head`) shows here, where it is handled, not at exit
        return code
    except HpcTrainError as error:
        return report(error, f"hpc-train {args.subcommand}")
    except BrokenPipeError:
        # Stop quietly, as Unix tools do, with their status (killed by SIGPIPE); Python would flush again at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13
