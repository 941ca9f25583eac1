"""Export this task's TF_CONFIG and GPU binding, then run a command.

    srun hpc-train bootstrap -- python train.py
    srun hpc-train bootstrap --strategy parameter_server --num-ps 2 -- python train.py
    srun hpc-train bootstrap --print      # this task's TF_CONFIG as JSON
    srun hpc-train bootstrap --all        # every task's role, host, port, GPUs

Roles: multiworker makes every rank a worker (worker 0 is the chief);
parameter_server makes rank 0 the chief, ranks 1..K the ps, the rest workers.
Ports: --port-base, else srun --resv-ports, else a window derived from
SLURM_JOB_ID in 16384-32767 (see docs/bootstrap.md).
"""

from __future__ import annotations

import argparse
import os
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from hpc_train.config import DEFAULT_MAX_REQUEUES, JOB_STRATEGIES  # (yaml with it: only once parsing)

    parser.usage = "%(prog)s [options] (--print | --all | -- COMMAND [ARG ...])"
    parser.add_argument("--strategy", choices=JOB_STRATEGIES, default="multiworker",
                        help="multiworker: all workers (default); parameter_server: chief, ps and workers")
    parser.add_argument("--num-ps", type=int, default=None, metavar="K",
                        help="parameter servers for --strategy parameter_server (default 1)")
    parser.add_argument("--port-base", type=int, default=None, metavar="PORT",
                        help="first port of the job's ports instead of the derived window")
    parser.add_argument("--print", action="store_true", dest="print_config",
                        help="print this task's TF_CONFIG as JSON and exit")
    parser.add_argument("--all", action="store_true", dest="print_all",
                        help="print the whole layout as a table and exit")
    parser.add_argument("--supervise", action="store_true",
                        help="run the command as a child instead of in this process: Slurm's warning reaches it as "
                             "SIGUSR1, and when it then exits 75 rank 0 requeues the job (see hpc-train submit --)")
    parser.add_argument("--max-requeues", type=int, default=DEFAULT_MAX_REQUEUES, metavar="N",
                        help=f"with --supervise: requeue the job at most N times (default {DEFAULT_MAX_REQUEUES})")
    add_command_arguments(parser)


def add_command_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a user's command (bootstrap, submit, render): its Keras and the signal its warning is."""
    from hpc_train.config import COMMAND_SIGNALS, KERAS_CHOICES

    parser.add_argument("--keras", choices=KERAS_CHOICES, default="auto",
                        help="what tf.keras is for the command: auto (default) tf-keras when it matches TensorFlow "
                             "(TF_USE_LEGACY_KERAS=1: Keras 3 cannot fit under these strategies), else Keras 3 with "
                             "a warning; 2: tf-keras or refuse; 3: Keras 3. A TF_USE_LEGACY_KERAS you set wins")
    parser.add_argument("--command-signal", choices=COMMAND_SIGNALS, default="USR1",
                        help="the signal Slurm's time-limit warning reaches the command as: USR1 (default), or TERM "
                             "for TensorFlow's PreemptionCheckpointHandler (it saves and exits 42, which requeues)")


def run(args: argparse.Namespace) -> int:
    import json

    from hpc_train.bootstrap import BootstrapOptions, compute_layout, format_table, tf_config
    from hpc_train.bootstrap.startup import say_notes
    from hpc_train.errors import HpcTrainError

    if args.num_ps is not None and args.strategy != "parameter_server":
        raise HpcTrainError("--num-ps applies to --strategy parameter_server only; drop it or add that strategy")
    printing = args.print_config or args.print_all
    if not printing and not args.command:
        raise HpcTrainError("nothing to run: give a command after --, or --print / --all to show the layout")
    options = BootstrapOptions(strategy=args.strategy, num_ps=1 if args.num_ps is None else args.num_ps,
                               port_base=args.port_base)
    if printing:
        layout = compute_layout(os.environ, options)
        say_notes(layout)
        if args.print_config:
            print(json.dumps(tf_config(layout)))
        if args.print_all:
            print(format_table(layout))
        return 0
    from hpc_train.injob.supervisor import CommandJob, keras_for, place, run_command

    if args.command_signal != "USR1" and not args.supervise:
        raise HpcTrainError("--command-signal applies with --supervise (hpc-train submit and render use it); without "
                            "it the command is this process, and gets Slurm's signals as they are")
    if args.supervise:
        job = CommandJob(tuple(args.command), args.strategy, options.num_ps, args.max_requeues, args.keras,
                         args.command_signal)
        return run_command(job, options=options)
    _, env = place(options, os.environ, keras_for(args.keras, os.environ))  # TF_CONFIG, GPUs, Keras, port, its line
    return _exec(args.command, env)


def _exec(command: list[str], env: dict[str, str]) -> int:
    """Replace this process by `command`; return an exit code only if that fails."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(command[0], command, env)
    except FileNotFoundError:
        print(f"hpc-train bootstrap: error: command not found: {command[0]!r} (check the command after --)",
              file=sys.stderr)
        return 127
    except PermissionError:
        print(f"hpc-train bootstrap: error: cannot run {command[0]!r}: permission denied", file=sys.stderr)
        return 126
