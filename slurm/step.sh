# Shared by the job scripts in slurm/ (sourced, not run).
#
# run_step NAME NODES TASKS_PER_NODE STRATEGY [hpc-train train arguments ...]
#   Runs the trainer once per task. Inside a Slurm job: `srun`, with the job's
#   nodes and tasks. Without Slurm: `hpc-train launch`, which starts the same
#   tasks on this machine with the variables srun would set. Each task's trainer
#   builds its TF_CONFIG and GPU binding from those variables (the bootstrap).
#   Results go to runs/<job name>-<job id>/ (NAME unless sbatch gave another),
#   the same folder when Slurm requeues the job, so the trainer resumes there.
#   HPC_TRAIN_DATA_DIR, if set, is passed as --data-dir.
#
# Failures: under multiworker one failed task ends the step (--kill-on-bad-exit=1),
# since its peers would wait for it in the next all-reduce; under parameter_server
# the chief carries on without a lost worker, so the step is not killed for one,
# and a job whose training finished ends as completed, with a warning. A task that
# died (a signal), hung or lost a peer, or a node lost, is retried: the job requeues
# itself without the node to blame and resumes from its last checkpoint
# (--set max_retries=N, default 3; 0: never). A task's own error is not retried.
# Time limits: the tasks checkpoint and requeue the job when Slurm's warning
# signal (#SBATCH --signal=USR1@120) reaches them; if it reaches this shell instead
# (--signal=B:USR1@..., scancel --batch --signal=USR1), it is passed on to them.
run_step() {
  local name=${SLURM_JOB_NAME:-$1} nodes=$2 per_node=$3 strategy=$4
  shift 4
  local job
  job="${SLURM_JOB_ID:-local-$(date +%Y%m%d-%H%M%S)}"
  local out="runs/${name}-${job}"
  local data=()
  if [ -n "${HPC_TRAIN_DATA_DIR:-}" ]; then
    data=(--data-dir "$HPC_TRAIN_DATA_DIR")
  fi
  local kill_on_bad_exit=1
  if [ "$strategy" = parameter_server ]; then
    kill_on_bad_exit=0
  fi
  local launch=()
  if [ -n "${SLURM_JOB_ID:-}" ] && command -v srun >/dev/null 2>&1; then
    launch=(srun --label --kill-on-bad-exit="$kill_on_bad_exit")
  else
    launch=(hpc-train launch --nodes "$nodes" --ntasks-per-node "$per_node" --kill-on-bad-exit "$kill_on_bad_exit" --)
  fi
  mkdir -p "$out"
  echo "hpc-train: job $job${SLURM_RESTART_COUNT:+ (restart $SLURM_RESTART_COUNT)} on ${SLURM_JOB_NODELIST:-this machine}; results in $out"
  if [ -n "${SLURM_JOB_ID:-}" ]; then  # how this attempt came about (hpc_train/injob/prologue.py)
    trap '' TERM  # 3: retries spent, the job ends; 4: requeued itself off a node that failed (SIGTERM follows)
    hpc-train prologue "$out" || case $? in 3) return 1 ;; 4) exit 0 ;; esac
    trap - TERM
  fi
  "${launch[@]}" hpc-train train --output-dir "$out" "${data[@]}" "$@" &
  local code=0
  wait_passing_signals $! || code=$?
  if [ "$code" -ne 0 ]; then  # retried on healthy nodes, or the job's exit code decided (hpc_train/injob/epilogue.py)
    trap '' TERM  # a retry requeues the job: this shell and the epilogue outlive the SIGTERM that follows
    hpc-train epilogue "$code" "$out" "$strategy" && code=0
  fi
  return "$code"
}

# wait_passing_signals PID: wait for PID, passing USR1 and USR2 on to it; return its exit code.
# (A shell runs a trap only between commands, so the step runs in the background.)
wait_passing_signals() {
  local pid=$1 code=0
  trap 'kill -s USR1 "$pid" 2>/dev/null || true' USR1
  trap 'kill -s USR2 "$pid" 2>/dev/null || true' USR2
  while :; do
    wait "$pid" && code=0 || code=$?
    kill -0 "$pid" 2>/dev/null || break  # a trap ended the wait, not the step: wait again
  done
  trap - USR1 USR2
  return "$code"
}
