"""Start a step's tasks on this machine as srun would (mock Slurm, for machines without it).

    hpc-train launch --nodes 2 --ntasks-per-node 2 -- hpc-train bootstrap -- python train.py
    hpc-train launch --nodes 2 --nodelist 'node[1-2]' -m cyclic -- CMD
    hpc-train launch --nodes 1 --ntasks-per-node 2 --gpus-per-node 2 -- CMD   # a GPU each

Each task gets SLURM_STEP_NODELIST, SLURM_STEP_NUM_TASKS, SLURM_STEP_TASKS_PER_NODE,
SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, SLURMD_NODENAME, SLURM_JOB_ID and
friends. Nodes are 127.0.0.1, 127.0.0.2, ... unless --nodelist names them (the
names must resolve). Output lines carry the rank; if a task fails, the others
are stopped (unless --kill-on-bad-exit 0) and its exit code is returned. USR1
and USR2 are passed on to every task; TERM and Ctrl-C stop them all. The tasks
share a check-in secret (HPC_TRAIN_SECRET_FILE, a private file removed at the end)
unless one is set already.

GPUs (from nvidia-smi -L, narrowed by your CUDA_VISIBLE_DEVICES) are bound as
Slurm binds --gpus-per-node G: each node G of them, each task its own share in
CUDA_VISIBLE_DEVICES; without --gpus-per-node the tasks see no GPU. More GPUs
than this machine has: refused before any task starts.
"""

from __future__ import annotations

import argparse



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = "%(prog)s --nodes N [--ntasks-per-node T] [options] -- COMMAND [ARG ...]"
    parser.add_argument("--nodes", "-N", type=int, required=True, metavar="N")
    parser.add_argument("--ntasks-per-node", type=int, default=1, metavar="T")
    parser.add_argument("--nodelist", "-w", default=None, metavar="LIST", help="node names (default 127.0.0.[1-N])")
    parser.add_argument("--distribution", "-m", choices=("block", "cyclic"), default="block")
    parser.add_argument("--job-id", type=int, default=None, metavar="ID", help="SLURM_JOB_ID (default: random)")
    parser.add_argument("--gpus-per-node", type=int, default=0, metavar="G",
                        help="GPUs of this machine per node, split among its tasks (default 0: the tasks see none)")
    parser.add_argument("--kill-on-bad-exit", "-K", type=int, choices=(0, 1), default=1, metavar="0|1",
                        help="1 (default): a failed task stops the others, as srun --kill-on-bad-exit=1")


def run(args: argparse.Namespace) -> int:
    import os
    import tempfile
    from pathlib import Path

    from hpc_train.errors import HpcTrainError
    from hpc_train.injob.mock_srun import Step, launch
    from hpc_train.runs.secret import SECRET_ENV, secret_environ

    if not args.command:
        raise HpcTrainError("nothing to launch: give the command after --")
    step = Step.make(args.nodes, args.ntasks_per_node, args.nodelist, args.distribution, args.job_id,
                     args.gpus_per_node)
    if SECRET_ENV in os.environ:  # (a job body's, or the user's: theirs)
        return launch(step, args.command, kill_on_bad_exit=bool(args.kill_on_bad_exit))
    # The ranks check in with a secret, as a job's do (docs/security.md): one of this launch's own, in a private
    # folder removed when the ranks end.
    with tempfile.TemporaryDirectory(prefix="hpc-train-launch-") as folder:
        return launch(step, args.command, {**os.environ, **secret_environ(Path(folder))},
                      kill_on_bad_exit=bool(args.kill_on_bad_exit))
