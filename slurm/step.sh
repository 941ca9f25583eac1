# Shared by the job scripts in slurm/ (sourced, not run).
#
# run_step NAME NODES TASKS_PER_NODE [hpc-train train arguments ...]
#   Runs the trainer once per task. Inside a Slurm job: `srun`, with the job's
#   nodes and tasks. Without Slurm: `hpc-train launch`, which starts the same
#   tasks on this machine with the variables srun would set. Each task's trainer
#   builds its TF_CONFIG and GPU binding from those variables (the bootstrap).
#   Results go to runs/<job name>-<job id>/ (NAME unless sbatch gave another);
#   HPC_TRAIN_DATA_DIR, if set, is passed as --data-dir.
run_step() {
  local name=${SLURM_JOB_NAME:-$1} nodes=$2 per_node=$3
  shift 3
  local job
  job="${SLURM_JOB_ID:-local-$(date +%Y%m%d-%H%M%S)}"
  local out="runs/${name}-${job}"
  local data=()
  if [ -n "${HPC_TRAIN_DATA_DIR:-}" ]; then
    data=(--data-dir "$HPC_TRAIN_DATA_DIR")
  fi
  local launch=()
  if [ -n "${SLURM_JOB_ID:-}" ] && command -v srun >/dev/null 2>&1; then
    # --kill-on-bad-exit: one failed task ends the step instead of leaving its peers waiting.
    launch=(srun --label --kill-on-bad-exit=1)
  else
    launch=(hpc-train launch --nodes "$nodes" --ntasks-per-node "$per_node" --)
  fi
  mkdir -p "$out"
  echo "hpc-train: job $job on ${SLURM_JOB_NODELIST:-this machine}; results in $out"
  "${launch[@]}" hpc-train train --output-dir "$out" "${data[@]}" "$@"
}
