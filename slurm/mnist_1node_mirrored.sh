#!/bin/bash
# MNIST on one node with MirroredStrategy: one process using all of the node's GPUs
# (on a CPU-only node, its CPU).
#
#   sbatch slurm/mnist_1node_mirrored.sh [--set key=value ...]   # from the project root
#   bash slurm/mnist_1node_mirrored.sh                           # without Slurm: runs here
#
# To adapt it to your cluster:
# - partition, account, time limit: the #SBATCH lines below, or on the sbatch command line.
# - GPUs: uncomment --gpus-per-node=G; batch_size is per GPU, so the global batch is 64 x G.
# - Data and software: as in slurm/mnist_2node.sh (HPC_TRAIN_DATA_DIR, env/setup.sh, env/site.sh).
# - Time limit: 2 minutes before it Slurm sends USR1; the job checkpoints, requeues itself
#   (--set max_requeues=N, default 5) and resumes at that step; the log keeps every run (append).
# - Failures: a task that dies, hangs or loses a peer, or a node lost: the job requeues itself
#   without that node and resumes from its last checkpoint (--set max_retries=N, default 3; 0: never).
# Log: slurm-mnist-mirrored-<jobid>.out here. Results: runs/mnist-mirrored-<jobid>/.
#
#SBATCH --job-name=mnist-mirrored
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=2
#SBATCH --time=00:30:00
#SBATCH --output=slurm-%x-%j.out
#SBATCH --open-mode=append
#SBATCH --requeue
#SBATCH --signal=USR1@120
##SBATCH --gpus-per-node=4
##SBATCH --partition=gpu
##SBATCH --account=my-project

set -euo pipefail
root="${HPC_TRAIN_HOME:-$PWD}"
source "$root/env/activate.sh"
# The job body (hpc-train job): the start line, the retries' prologue, the step (srun, or without Slurm the
# same tasks on this machine), the epilogue after a failure; results in runs/mnist-mirrored-<jobid>/.
exec hpc-train job --name mnist-mirrored --nodes 1 --ntasks-per-node 1 --strategy mirrored --trainer -- \
  hpc-train train --config "$root/templates/mnist-mirrored.yaml" "$@"
