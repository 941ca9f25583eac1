#!/usr/bin/env bash
# The main job in one command, on a fresh Linux machine: MNIST on 2 nodes under Slurm.
#   env/demo.sh [--set key=value ...]      e.g. env/demo.sh --set epochs=3
# Sets up .venv, uses the Slurm this machine reaches or else starts a local one
# (root; installs slurm-wlm and munge), submits slurm/mnist_2node.sh, shows its
# progress, and prints the accuracy, the time, and where the log and model are.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
env/setup.sh test
source env/activate.sh

if command -v sbatch >/dev/null 2>&1 && sinfo -h >/dev/null 2>&1; then
  echo "env/demo.sh: using the Slurm cluster this machine reaches ($(sinfo -h -o %P | head -n 1 | tr -d '*') partition)"
elif [ "$(id -u)" -eq 0 ]; then
  echo "env/demo.sh: no Slurm reachable: starting a local one (hpc-train cluster up)"
  hpc-train cluster up
  eval "$(hpc-train cluster env)"
else
  echo "env/demo.sh: no Slurm reachable and not root: running the job's tasks here with hpc-train launch" >&2
  exec bash slurm/mnist_2node.sh "$@"
fi

# MNIST: the staged copy beside the project, else Keras' cache, else a download.
if [ -z "${HPC_TRAIN_DATA_DIR:-}" ] && [ -f "$root/../shared/data/mnist/t10k-images-idx3-ubyte.gz" ]; then
  HPC_TRAIN_DATA_DIR="$(cd "$root/../shared/data/mnist" && pwd)"
  export HPC_TRAIN_DATA_DIR
fi
if [ -z "${HPC_TRAIN_DATA_DIR:-}" ] && [ ! -f "${KERAS_HOME:-$HOME/.keras}/datasets/mnist.npz" ]; then
  hpc-train data fetch
fi
exec python -m hpc_train.demo --script slurm/mnist_2node.sh -- "$@"
