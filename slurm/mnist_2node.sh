#!/bin/bash
# MNIST on 2 nodes with MultiWorkerMirroredStrategy: one task per node.
#
#   sbatch slurm/mnist_2node.sh [--set key=value ...]    # from the project root
#   bash slurm/mnist_2node.sh [--set key=value ...]      # without Slurm: tasks run on this machine
#
# To adapt it to your cluster:
# - partition, account, time limit: the #SBATCH lines below, or on the command line
#   (sbatch -p gpu -A my-project -t 2:00:00 slurm/mnist_2node.sh).
# - GPUs: uncomment --gpus-per-node=G and set --ntasks-per-node=G: one task per GPU,
#   each given its own GPU by the bootstrap. A CPU-only cluster keeps the GPU line off.
# - Data: export HPC_TRAIN_DATA_DIR=DIR holding MNIST (IDX .gz files or mnist.npz, staged
#   on a login node with `hpc-train data fetch --dest DIR`); else Keras' cache is used.
# - Software: run env/setup.sh once; site modules go in env/site.sh (env/site.example.sh).
#   Submit from the project root, or set HPC_TRAIN_HOME to it (results go where you submit).
# - Time limit: 2 minutes before it Slurm sends USR1; the job checkpoints, requeues itself
#   (--set max_requeues=N, default 5) and resumes at that step; the log keeps every run (append).
# - Failures: a task that dies, hangs or loses a peer, or a node lost: the job requeues itself
#   without that node and resumes from its last checkpoint (--set max_retries=N, default 3; 0: never).
# - Busy cluster: a node range starts on the nodes free now. Replace --nodes=2 and --ntasks-per-node=1
#   with --nodes=2-4 (with --ntasks-per-node Slurm gives a range only its MIN), give the job line below
#   --nodes 4 --node-range 2-4, and fix the global batch with --set global_batch=240 (every size divides it):
#   each attempt then trains the same on the nodes it got, never fewer than 2 (docs/jobs.md, "Node ranges").
# - Busy cluster: a node range starts on the nodes free now. Replace --nodes=2 and --ntasks-per-node=1
#   with --nodes=2-4 (with --ntasks-per-node Slurm gives a range only its MIN), give the job line below
#   --nodes 4 --node-range 2-4, and fix the global batch with --set global_batch=240 (every size divides it):
#   each attempt then trains the same on the nodes it got, never fewer than 2 (docs/jobs.md, "Node ranges").
# Log: slurm-mnist-2node-<jobid>.out here. Results: runs/mnist-2node-<jobid>/.
#
#SBATCH --job-name=mnist-2node
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=2
#SBATCH --time=00:30:00
#SBATCH --output=slurm-%x-%j.out
#SBATCH --open-mode=append
#SBATCH --requeue
#SBATCH --signal=USR1@120
##SBATCH --gpus-per-node=1
##SBATCH --partition=gpu
##SBATCH --account=my-project

set -euo pipefail
root="${HPC_TRAIN_HOME:-$PWD}"
source "$root/env/activate.sh"
# The job body (hpc-train job): the start line, the retries' prologue, the step (srun, or without Slurm the
# same tasks on this machine), the epilogue after a failure; results in runs/mnist-2node-<jobid>/.
exec hpc-train job --name mnist-2node --nodes 2 --ntasks-per-node 1 --strategy multiworker --trainer -- \
  hpc-train train --config "$root/templates/mnist-multiworker.yaml" "$@"
