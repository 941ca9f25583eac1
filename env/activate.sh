# Source this in a job script to get hpc-train's environment:
#   source env/activate.sh
# It loads the site's modules (env/site.sh, if you made one from env/site.example.sh),
# then activates the project's .venv (made by env/setup.sh). Works from the project
# root, which is where sbatch jobs start when submitted from there.
_hpc_train_root="${HPC_TRAIN_HOME:-${SLURM_SUBMIT_DIR:-$PWD}}"
if [ -f "$_hpc_train_root/env/site.sh" ]; then
  # shellcheck disable=SC1091
  source "$_hpc_train_root/env/site.sh"
fi
if [ -f "$_hpc_train_root/.venv/bin/activate" ]; then
  # shellcheck disable=SC1091
  source "$_hpc_train_root/.venv/bin/activate"
elif ! command -v hpc-train >/dev/null 2>&1; then
  echo "env/activate.sh: error: no $_hpc_train_root/.venv and no hpc-train on PATH; run env/setup.sh in the project root (or set HPC_TRAIN_HOME)" >&2
  return 2 2>/dev/null || exit 2
fi
unset _hpc_train_root
