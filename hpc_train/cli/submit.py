"""Submit a training job to Slurm (through submitit), or run it here with --local.

    hpc-train submit --nodes 4 --gpus-per-node 2                 # 8 tasks, one per GPU, MultiWorkerMirrored
    hpc-train submit --nodes 4 --gpus-per-node 2 --one-task-per-node   # 4 tasks, each mirroring 2 GPUs
    hpc-train submit --nodes 2 --strategy parameter_server --ntasks-per-node 2 --config job.yaml
    hpc-train submit ... --dry-run                               # print the sbatch script, submit nothing
    hpc-train submit ... --local                                 # no Slurm: tasks run here (mock launcher)
    hpc-train submit --nodes 2 -- python train.py --epochs 3     # your own script on every task

The request is checked before anything is submitted. The job's folder is
runs/NAME-JOBID/: the submitted script, config.yaml, job.json, a log per rank
(JOBID_RANK_log.out/.err), checkpoints, TensorBoard events and metrics.json.
Follow it with hpc-train status, logs, cancel and list.

With `-- COMMAND ARGS...`, every task runs COMMAND instead of the trainer, in
the directory you submit from, with TF_CONFIG and its GPUs set by the
bootstrap and HPC_TRAIN_RUN_DIR naming the job's folder. Slurm's time-limit
warning reaches it as SIGUSR1 (--signal-seconds before the end); a command that
then saves and exits 75 has the job requeued (max_requeues), to run again and
resume. The job's exit is the command's; a task that dies ends the job.
"""

from __future__ import annotations

import argparse

from hpc_train.cli.joboptions import add_job_arguments, job_request



def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_job_arguments(parser)
    parser.add_argument("--dry-run", action="store_true", help="print the sbatch script that would be submitted")
    parser.add_argument("--local", action="store_true", help="run the tasks on this machine, without Slurm")
    parser.add_argument("--hold", action="store_true", help="submit held: it starts after scontrol release JOBID")


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from hpc_train.config import read_sweep
    from hpc_train.errors import HpcTrainError
    from hpc_train.jobs import submit

    spec, train, _ = job_request(args)
    if args.sweep or args.max_parallel is not None or read_sweep(args.config) is not None:
        raise HpcTrainError("submit does not run sweeps yet: write the job array with hpc-train render --sweep ... "
                            "-o sweep.sbatch, then sbatch sweep.sbatch")
    if args.hold:
        spec = replace(spec, hold=True)
    if args.local and args.home:
        raise HpcTrainError("--home with --local: --local runs the ranks here, in this environment; drop --home")
    if args.home is not None:  # (render may name a folder of another machine: its script copes with none there)
        from hpc_train.jobs.render import activation_script

        activation_script(args.home)  # one that activates nothing is refused now, not in the job's log
    if args.dry_run:
        print(submit.submission_script(spec, home=args.home, config=train, command=args.command), end="")
        return 0
    if args.local:
        return submit.run_locally(spec, train, command=args.command)
    record = submit.submit(spec, train, command=args.command, home=args.home)
    print(record.job_id)
    print(f"hpc-train submit: job {record.job_id} ({record.tasks} tasks on {record.nodes} nodes, {record.what}); folder "
          f"{record.folder}; follow it with: hpc-train logs {record.job_id} --follow", flush=True)
    return 0
