#!/bin/bash
# MNIST with ParameterServerStrategy as ONE heterogeneous job: the chief and the parameter server on a CPU
# partition (component 0, no GPU asked for), the four workers on a GPU partition (component 1, a GPU each).
# One srun --het-group=0,1 step runs them all; every rank builds the same TF_CONFIG from it (docs/bootstrap.md).
#
#   sbatch slurm/mnist_ps_het.sh [--set epochs=3 ...]    # from the project root
#   bash slurm/mnist_ps_het.sh                           # without Slurm: the same 6 tasks on this machine
#
# To adapt it to your cluster:
# - Partitions: the two --partition lines (cpu and gpu here; sinfo lists yours). A local cluster with both:
#   hpc-train cluster up --partition cpu:node[1-2]:0 --partition gpu:node[3-4]:2
# - More parameter servers: raise component 0's --ntasks to 1 + K (its ranks after the chief are the ps, whatever
#   num_ps says) and its --nodes up to that many; more workers: component 1's --nodes or --gpus-per-node.
# - account, time limit: the first block holds the job's own options (name, time, log, requeue, warning).
# - Data and software: as in slurm/mnist_2node.sh (HPC_TRAIN_DATA_DIR, env/setup.sh, env/site.sh).
# - The same job from the command line: hpc-train submit --strategy parameter_server --nodes 2 --gpus-per-node 2
#   --partition gpu --ps-partition cpu (or hpc-train render ... -o job.sbatch).
# Log: slurm-mnist-ps-het-<jobid>.out here. Results and a log per rank: runs/mnist-ps-het-<jobid>/.
#
#SBATCH --job-name=mnist-ps-het
#SBATCH --partition=cpu
#SBATCH --nodes=1
#SBATCH --ntasks=2
#SBATCH --cpus-per-task=1
#SBATCH --time=00:30:00
#SBATCH --output=slurm-%x-%j.out
#SBATCH --open-mode=append
#SBATCH --requeue
#SBATCH --signal=USR1@120
##SBATCH --account=my-project
#SBATCH hetjob
#SBATCH --partition=gpu
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --gpus-per-node=2
#SBATCH --cpus-per-task=1

set -euo pipefail
root="${HPC_TRAIN_HOME:-$PWD}"
source "$root/env/activate.sh"
# The job body (hpc-train job): the start line, the retries' prologue, the step (srun --het-group=0,1 across
# both components; without Slurm the same tasks on this machine), the epilogue after a failure.
exec hpc-train job --name mnist-ps-het --nodes 3 --ntasks-per-node 2 --strategy parameter_server --trainer -- \
  hpc-train train --config "$root/templates/mnist-parameter_server.yaml" "$@"
