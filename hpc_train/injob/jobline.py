"""The job body's one line read back (`hpc-train job [options] -- RANK_COMMAND`): parse makes the JobBody and the ranks'
command of what spec/jobline.py's script_line (render, submit) and words (--local) wrote."""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from hpc_train.container.runtime import choose_runtime
from hpc_train.injob.epilogue import QuietParser
from hpc_train.spec.data_service import of_words
from hpc_train.spec.jobline import JobBody

USAGE = ("usage: hpc-train job (--run-dir DIR | --name NAME) [--nodes N] [--ntasks-per-node T] [--strategy S] "
         "[--max-retries N] [--retry-exit-codes C,...] [--command] [--output PATTERN] [--error PATTERN] "
         "[--hang-minutes M] [--node-range MIN-MAX] [--track mlflow [--tracking-uri URI] [--experiment NAME]] "
         "[--trainer] [--data-workers N|auto [--data-cpus C] [--data-partition P]] "
         "[--container IMAGE [--container-runtime R]] -- COMMAND ...")


def run_dir_for(name: str, env: Mapping[str, str], now: float) -> Path:
    """runs/NAME-JOBID: Slurm's job name and id when there are any (the same folder when the job is requeued),
    else NAME and a local id from the time (pure)."""
    job_id = env.get("SLURM_JOB_ID") or time.strftime("local-%Y%m%d-%H%M%S", time.localtime(now))
    return Path("runs") / f"{env.get('SLURM_JOB_NAME') or name}-{job_id}"


def parser() -> argparse.ArgumentParser:
    parser = QuietParser(prog="hpc-train job", add_help=False)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--run-dir", type=Path)
    where.add_argument("--name")
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--ntasks-per-node", type=int, default=1)
    parser.add_argument("--strategy", default="multiworker")
    parser.add_argument("--max-retries", type=int, default=None)
    parser.add_argument("--retry-exit-codes", default="")
    parser.add_argument("--command", action="store_true")
    parser.add_argument("--output")
    parser.add_argument("--error")
    parser.add_argument("--hang-minutes", type=float, default=None)
    parser.add_argument("--trainer", action="store_true")
    parser.add_argument("--track", choices=("none", "mlflow"), default=None)
    parser.add_argument("--tracking-uri")
    parser.add_argument("--experiment")
    parser.add_argument("--container")
    parser.add_argument("--container-runtime")
    parser.add_argument("--node-range")
    parser.add_argument("--gpus-per-node", type=int, default=0)  # (the mock launcher's: `bash job.sbatch`)
    parser.add_argument("--num-ps", type=int, default=1)
    parser.add_argument("--data-workers", default=None)  # N, or auto
    parser.add_argument("--data-cpus", type=int, default=1)
    parser.add_argument("--data-partition")
    return parser




def parse(argv: Sequence[str], env: Mapping[str, str], now: float) -> tuple[JobBody, list[str]]:
    """The body and the ranks' command from `hpc-train job`'s arguments; ValueError when they are wrong.

    `--trainer`: the command is `hpc-train train ...`, given the run folder as its --output-dir."""
    argv = list(argv)
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        raise ValueError("no command after --")
    at = argv.index("--")
    args = parser().parse_args(argv[:at])
    command = argv[at + 1:]
    run_dir = args.run_dir if args.run_dir is not None else run_dir_for(args.name, env, now)
    hang = args.hang_minutes if args.hang_minutes is not None or not args.trainer else trainers_hang_minutes(command)
    said = {key: trainers_setting(command, key) if args.trainer else None
            for key in ("track", "tracking_uri", "experiment")}  # the slurm/*.sh scripts' --set track=mlflow
    body = JobBody(run_dir, args.strategy, args.nodes, args.ntasks_per_node, args.max_retries,
                   tuple(int(code) for code in args.retry_exit_codes.split(",") if code.strip()), args.command,
                   args.output, args.error, hang, args.track or said["track"] or "none",
                   args.tracking_uri or said["tracking_uri"], args.experiment or said["experiment"],
                   node_range=args.node_range, gpus_per_node=args.gpus_per_node, num_ps=args.num_ps,
                   container=choose_runtime(args.container, args.container_runtime, Path(args.container).is_dir())
                   if args.container else None,
                   data_service=of_words(args.data_workers, args.data_partition, args.data_cpus)
                   if args.data_workers is not None else None)
    return body, [*command, "--output-dir", str(run_dir)] if args.trainer else command


def trainers_hang_minutes(command: Sequence[str]) -> float | None:
    """The trainer's hang_minutes: its last `--set hang_minutes=M` (the slurm/*.sh scripts' way of saying settings),
    else its --config file's; None when there is none or it is not a number (the trainer refuses it then)."""
    from hpc_train.injob.watchdog import config_setting, number

    said = trainers_setting(command, "hang_minutes")
    return number(said if said is not None else config_setting(command, "hang_minutes"))


def trainers_setting(command: Sequence[str], key: str) -> str | None:
    """The last `--set KEY=VALUE` given to the trainer, its text; None when there is none (pure)."""
    values = [word.split("=", 2)[-1] if word.startswith("--set=") else word.split("=", 1)[1]
              for before, word in zip(["", *command], command)
              if word.startswith(f"--set={key}=") or (before == "--set" and word.startswith(f"{key}="))]
    return values[-1] if values else None


