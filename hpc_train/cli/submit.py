"""Submit a training job to Slurm (through submitit), or run it here with --local.

    hpc-train submit --nodes 4 --gpus-per-node 2                 # 8 tasks, one per GPU, MultiWorkerMirrored
    hpc-train submit --nodes 4 --gpus-per-node 2 --one-task-per-node   # 4 tasks, each mirroring 2 GPUs
    hpc-train submit --nodes 2 --strategy parameter_server --ntasks-per-node 2 --config job.yaml
    hpc-train submit ... --dry-run                               # print the sbatch script, submit nothing
                                                    # (refused as submit refuses it, Slurm's checks included)
    hpc-train submit ... --local                                 # no Slurm: tasks run here (mock launcher)
    hpc-train submit --nodes 2 -- python train.py --epochs 3     # your own script on every task
    hpc-train submit --nodes 2 --sweep learning_rate=0.01,0.001 --sweep seed=1,2 --max-parallel 2  # a job array
    hpc-train submit --strategy parameter_server --nodes 2 --gpus-per-node 2 --partition gpu --ps-partition cpu
                                                    # chief and ps on CPU nodes: one heterogeneous job
    hpc-train submit --nodes 2 --after 1234 --sbatch reservation=maint --sbatch exclude=node3
                                                    # once job 1234 ends (afterany); any other sbatch option

The request is checked before anything is submitted. The job's folder is
runs/NAME-JOBID/: the submitted script, config.yaml, job.json, the job's own log
(slurm-NAME-JOBID.out: hpc-train logs JOBID --job), a log per rank (logs/rank-N.out), checkpoints, TensorBoard
events and metrics.json.
Follow it with hpc-train status, logs, cancel and list. submit prints the job
id alone on stdout (JOB=$(hpc-train submit ...)), and what it did on stderr.

With `-- COMMAND ARGS...`, every task runs COMMAND instead of the trainer, in
the directory you submit from, with TF_CONFIG and its GPUs set by the
bootstrap and HPC_TRAIN_RUN_DIR naming the job's folder. Slurm's time-limit
warning reaches it as SIGUSR1 (--signal-seconds before the end); a command that
then saves and exits 75 has the job requeued (max_requeues), to run again and
resume. The job's exit is the command's; a task that dies ends the job.

Every attempt of the job runs the code as submitted: a snapshot taken now (git's files: HEAD, uncommitted
changes, untracked files not ignored; else this directory's), stored once in runs/snapshots/<digest>/, whose copy
of this directory the tasks start in (HPC_TRAIN_SUBMIT_DIR names this one, for data). Over --snapshot-limit-mb
(50) it is refused: --snapshot-exclude PATTERN (or .gitignore, for files git does not track) leaves data out;
--no-snapshot runs the code on disk. runs/NAME-JOBID/provenance.json records the commit, the diff and the versions.

With `--sweep KEY=V1,V2,...` (repeatable: every combination) or the YAML's
`sweep:` (a grid, or a random search), one sbatch submits one job array: each
element is a whole job with its own values, run folder runs/NAME-ARRAYID_I/,
retries and resume; `{KEY}` in a command becomes the element's value.
`hpc-train status ARRAYID` shows a row per element; `logs ARRAYID_I`,
`cancel ARRAYID` (or ARRAYID_I) and `list` know sweeps too.

With `--ps-partition NAME` (parameter_server only; `--num-ps K`, `--ps-nodes M`) the chief and the ps run on
that partition without GPUs and the workers on --partition, as one heterogeneous job (`#SBATCH hetjob`; the
rendered script is submitted through sbatch, not submitit): one srun --het-group=0,1 step, one TF_CONFIG,
a log per rank in runs/NAME-JOBID/logs/rank-R.out. Not with a sweep or --local.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hpc_train.cli.joboptions import add_job_arguments, job_plan, job_request, sweep_request

TYPE_CHECKING = False  # (typing itself costs start-up)
if TYPE_CHECKING:
    from hpc_train.login.plan import JobPlan
    from hpc_train.runs.snapshot import JobCode



def add_arguments(parser: argparse.ArgumentParser) -> None:
    from hpc_train.runs.snapshot import DEFAULT_LIMIT

    add_job_arguments(parser)
    parser.add_argument("--dry-run", action="store_true", help="print the sbatch script that would be submitted")
    parser.add_argument("--local", action="store_true", help="run the tasks on this machine, without Slurm")
    parser.add_argument("--hold", action="store_true", help="submit held: it starts after scontrol release JOBID")
    parser.add_argument("--output-dir", type=Path, default=None, metavar="DIR",
                        help="the runs folder: runs/NAME-JOBID/ and runs/snapshots/ in it (default: runs/ here)")
    parser.add_argument("--no-snapshot", action="store_true",
                        help="run the code on disk when the job (re)starts, not a snapshot taken now")
    parser.add_argument("--snapshot-exclude", action="append", default=[], metavar="PATTERN",
                        help="leave files out of the code snapshot: a gitignore-like glob (repeatable; e.g. data/, *.h5)")
    parser.add_argument("--snapshot-limit-mb", type=float, default=DEFAULT_LIMIT / 1024 / 1024, metavar="MB",
                        help=f"refuse a code snapshot bigger than this (default {DEFAULT_LIMIT // 1024 // 1024}): "
                             "data is not code")
    parser.add_argument("--in-snapshot", action="store_true", help=argparse.SUPPRESS)  # (submit --remote's)


def _check_snapshot_options(args: argparse.Namespace) -> str | None:
    """One line for snapshot options that contradict each other; the project folder that names the job when --name
    does not: --in-snapshot's, the folder the snapshot was taken of (not "files", its copy's); None: this one."""
    from hpc_train.errors import HpcTrainError

    if args.snapshot_limit_mb <= 0:
        raise HpcTrainError(f"--snapshot-limit-mb {args.snapshot_limit_mb:g}: must be more than 0")
    if not args.in_snapshot:
        return None
    if args.no_snapshot or args.snapshot_exclude:
        raise HpcTrainError("--in-snapshot runs a snapshot already stored: drop --no-snapshot and --snapshot-exclude")
    from hpc_train.runs.snapshot import stored_snapshot, taken_of
    from hpc_train.spec.request import project_name

    return project_name(taken_of(stored_snapshot(Path.cwd())))


def _check_request(args: argparse.Namespace, is_sweep: bool) -> None:
    """One line for --local, --home and a sweep that contradict each other, or a --home that activates nothing."""
    from hpc_train.errors import HpcTrainError

    if args.local and is_sweep:
        raise HpcTrainError("--local with a sweep: a sweep runs as a Slurm job array; drop --local (hpc-train "
                            "cluster up gives a local Slurm)")
    if args.local and args.home:
        raise HpcTrainError("--home with --local: --local runs the ranks here, in this environment; drop --home")
    if args.home is not None:  # (render may name a folder of another machine: its script copes with none there)
        from hpc_train.login.script import activation_script

        activation_script(args.home)  # one that activates nothing is refused now, not in the job's log


def job_code(args: argparse.Namespace) -> tuple[JobCode | None, Path]:
    """The snapshot the job runs (none with --no-snapshot; a dry run's is not stored) and the runs folder.
    --in-snapshot: this directory is a stored snapshot's workdir; the job's submit directory is the runs folder's
    parent (a remote's workdir)."""
    import shutil

    from hpc_train.errors import HpcTrainError
    from hpc_train.runs.snapshot import JobCode, SNAPSHOTS, plan_snapshot, stored_snapshot, take_snapshot

    if args.in_snapshot:
        snapshot = stored_snapshot(Path.cwd())
        runs = (args.output_dir or snapshot.root.parent.parent).absolute()
        if snapshot.root.parent != runs / SNAPSHOTS:
            raise HpcTrainError(f"--in-snapshot: {snapshot.root} is not in {runs / SNAPSHOTS}; give the runs "
                                "folder it is in as --output-dir")
        return JobCode(snapshot, runs.parent), runs
    runs = args.output_dir or Path("runs")
    if args.no_snapshot:
        return None, runs
    # Stored when it will run: not for a dry run, nor where submit is refused for want of Slurm.
    stored = not args.dry_run and (args.local or shutil.which("sbatch") is not None)
    take = take_snapshot if stored else plan_snapshot
    limit = int(args.snapshot_limit_mb * 1024 * 1024)
    return JobCode(take(Path.cwd(), runs, args.snapshot_exclude, limit), Path.cwd()), runs


def run(args: argparse.Namespace) -> int:
    import os
    import shutil
    import sys

    from hpc_train.login import submission as submit
    from hpc_train.login.preflight import before_submit
    from hpc_train.utilization.settings import Sampling

    here = _check_snapshot_options(args)
    spec, train, home = job_request(args, here)
    sweep = sweep_request(args, train, spec)
    _check_request(args, sweep is not None)  # before the snapshot is stored: a refused submit leaves none
    Sampling.from_environment(os.environ)  # likewise: the job's utilization settings, which every rank reads
    # Likewise: what this machine or Slurm would refuse (a dry run's too; its word that Slurm does not answer waits
    # for the script).
    unchecked = before_submit(spec, os.environ, args.local, args.dry_run, shutil.which("sbatch") is not None)
    code, runs = job_code(args)
    plan = job_plan(args, spec, train, home, sweep, runs, code)
    if unchecked:  # (a dry run past every refusal: one line, then what it shows)
        print(unchecked, file=sys.stderr)
    if args.dry_run:  # render's script, byte for byte (login/plan.py), and which way submit would send it
        print(f"hpc-train submit: dry run: {plan.how()}", file=sys.stderr)
        if sweep is not None:
            print(sweep_heading(plan))
        print(plan.script(), end="")
        return 0
    if args.local:
        submit.run_locally(plan)  # (this process becomes the job's body: it does not return)
    if sweep is not None:
        return _submit_sweep(plan)
    record = submit.submit_plan(plan)
    shape = (f"up to {record.tasks} tasks on {spec.groups[-1].node_range}" if spec.ranged  # each attempt: its own
             else f"{record.tasks} tasks on {record.nodes}")
    _say_submitted(record.job_id, f"hpc-train submit: job {record.job_id} ({shape} nodes, {record.what}); folder "
                   f"{record.folder}; follow it with: hpc-train logs {record.job_id} --follow")
    return 0


def sweep_heading(plan: JobPlan) -> str:
    """A sweep's elements (or a pack's trials), as a table under one line (a dry run's and submit's)."""
    from hpc_train.spec.sweep import table

    assert plan.sweep is not None
    return "\n".join([f"hpc-train submit: {plan.heading()}:", *(f"  {row}" for row in table(plan.sweep))])


def _submit_sweep(plan: JobPlan) -> int:
    """One sbatch: a job array, or with --pack one job whose trials run inside it."""
    import sys

    from hpc_train.login import submission as submit

    packed = plan.kind == "pack"
    record = (submit.submit_pack if packed else submit.submit_sweep)(plan)
    print(sweep_heading(plan), file=sys.stderr)  # once submitted: a refusal stays one line
    count = len(plan.sweep or ())
    what = f"packed sweep {record.job_id} ({count} trials" if packed else f"sweep {record.job_id} ({count} elements"
    _say_submitted(record.job_id, f"hpc-train submit: {what}, runs/{record.name}-{record.job_id}_I/); follow it "
                   f"with: hpc-train status {record.job_id}")
    return 0


def _say_submitted(job_id: str, message: str) -> None:
    """The id alone on stdout (JOB=$(hpc-train submit ...) gets it and nothing else); the words on stderr. Where
    this machine also sends jobs to remotes, it is remembered as submitted here: its id now means this one."""
    import os
    import sys

    from hpc_train.remote.sent import HERE, remember

    remember(job_id, HERE, os.environ, only_if_kept=True)

    print(job_id, flush=True)
    print(message, file=sys.stderr, flush=True)
