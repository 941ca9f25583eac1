#!/bin/bash
# MNIST with ParameterServerStrategy: rank 0 is the chief (runs the training loop),
# rank 1 the parameter server, ranks 2-3 the workers. Every task exits when training ends.
#
#   sbatch slurm/mnist_ps.sh [--set num_ps=2 ...]        # from the project root
#   bash slurm/mnist_ps.sh                               # without Slurm: tasks run on this machine
#
# To adapt it to your cluster:
# - partition, account, time limit: the #SBATCH lines below, or on the sbatch command line.
# - More workers or parameter servers: raise --nodes/--ntasks-per-node and pass --set num_ps=K
#   (at least K + 2 tasks: one chief, K ps, one or more workers).
# - GPUs: uncomment --gpus-per-node. Only workers use them: the chief and ps are masked
#   from GPUs (CUDA_VISIBLE_DEVICES=""), and a node's GPUs are split among its workers.
# - Data and software: as in slurm/mnist_2node.sh (HPC_TRAIN_DATA_DIR, env/setup.sh, env/site.sh).
# - Time limit: 2 minutes before it Slurm sends USR1; the job checkpoints, requeues itself
#   (--set max_requeues=N, default 5) and resumes at that step; the log keeps every run (append).
# - Failures: a task that dies, hangs or loses a peer, or a node lost: the job requeues itself
#   without that node and resumes from its last checkpoint (--set max_retries=N, default 3; 0: never).
# Log: slurm-mnist-ps-<jobid>.out here. Results: runs/mnist-ps-<jobid>/.
#
#SBATCH --job-name=mnist-ps
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=1
#SBATCH --time=00:30:00
#SBATCH --output=slurm-%x-%j.out
#SBATCH --open-mode=append
#SBATCH --requeue
#SBATCH --signal=USR1@120
##SBATCH --gpus-per-node=2
##SBATCH --partition=gpu
##SBATCH --account=my-project

set -euo pipefail
root="${HPC_TRAIN_HOME:-$PWD}"
source "$root/env/activate.sh"
# The job body (hpc-train job): the start line, the retries' prologue, the step (srun, or without Slurm the
# same tasks on this machine), the epilogue after a failure; results in runs/mnist-ps-<jobid>/.
exec hpc-train job --name mnist-ps --nodes 2 --ntasks-per-node 2 --strategy parameter_server --trainer -- \
  hpc-train train --config "$root/templates/mnist-parameter_server.yaml" "$@"
