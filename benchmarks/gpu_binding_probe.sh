#!/usr/bin/env bash
# How `hpc-train launch` binds this machine's GPUs (issue 36, 1), shown on a real GPU machine: nvidia-smi on PATH,
# PyTorch for the per-rank check, no TensorFlow needed. Prints, per case, the command, every rank's
# CUDA_VISIBLE_DEVICES with what torch sees (torch.cuda.device_count(), the name of device 0), and the exit code.
#
#   bash benchmarks/gpu_binding_probe.sh            # from the project root
#   PYTHON=/path/to/python bash benchmarks/gpu_binding_probe.sh
#
# The launcher needs only python-hostlist and pyyaml besides the checkout (PYTHONPATH gets the root); without
# torch each rank says "torch: not installed". Cases: 1 task with 1 GPU; 2 tasks with --gpus-per-node 1 (on 2
# nodes: a GPU each, or the one-line refusal on a 1-GPU machine; on 1 node: the bootstrap's refusal); 2 tasks
# with no --gpus-per-node (no GPU, a note); more GPUs per node than the machine has (refused in one line); and a
# rank bound to a GPU the node lacks, through the bootstrap (its one warning line before the command runs).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python="${PYTHON:-python3}"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
unset CUDA_VISIBLE_DEVICES  # every GPU of the machine, as nvidia-smi lists them (set it after this line to narrow)
if ! "$python" -c 'import hostlist, yaml' 2>/dev/null; then
  echo "gpu_binding_probe: $python lacks python-hostlist or pyyaml: pip install python-hostlist pyyaml" >&2
  exit 2
fi

# What each rank runs (RANK_PROBE in the commands shown): its CUDA_VISIBLE_DEVICES, then what torch sees.
rank_probe='import os
print("CUDA_VISIBLE_DEVICES=%r" % os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)"))
try:
    import torch
except ImportError:
    print("torch: not installed")
else:
    count = torch.cuda.device_count()
    print("torch:", count, torch.cuda.get_device_name(0) if count else "(no device 0)")'

case_() {  # case_ TITLE ARGS... : one launch, its output and exit code
  local title="$1"; shift
  local shown=()
  for word in "$@"; do [ "$word" = "$rank_probe" ] && shown+=("RANK_PROBE") || shown+=("$word"); done
  echo; echo "== $title"; echo "\$ hpc-train launch ${shown[*]}"
  timeout 300 "$python" -m hpc_train launch "$@" 2>&1
  echo "-> exit $?"
}

echo "== nvidia-smi -L"
if command -v nvidia-smi >/dev/null; then nvidia-smi -L; else echo "(no nvidia-smi on PATH: this machine has no GPU)"; fi
gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)"
echo "GPUs listed: ${gpus:-0}"

case_ "1 task, --gpus-per-node 1" --nodes 1 --ntasks-per-node 1 --gpus-per-node 1 -- "$python" -c "$rank_probe"
case_ "2 tasks on 2 nodes, --gpus-per-node 1 (a GPU each; refused with fewer than 2 GPUs)" \
  --nodes 2 --ntasks-per-node 1 --gpus-per-node 1 -- "$python" -c "$rank_probe"
case_ "2 tasks on 1 node, --gpus-per-node 1 (refused: more tasks than GPUs, the bootstrap's rule)" \
  --nodes 1 --ntasks-per-node 2 --gpus-per-node 1 -- "$python" -c "$rank_probe"
case_ "2 tasks, no --gpus-per-node (no GPU, as under Slurm; a note)" \
  --nodes 1 --ntasks-per-node 2 -- "$python" -c "$rank_probe"
case_ "more GPUs per node than the machine has (refused in one line, exit 2, no task started)" \
  --nodes 1 --ntasks-per-node 1 --gpus-per-node "$(( ${gpus:-0} + 1 ))" -- "$python" -c "$rank_probe"
case_ "1 task through the bootstrap (its rank line names the GPU)" \
  --nodes 1 --ntasks-per-node 1 --gpus-per-node 1 -- "$python" -m hpc_train bootstrap -- "$python" -c "$rank_probe"

echo; echo "== a rank bound to GPU ${gpus:-0}, which this node lacks (the bootstrap's warning, then the command)"
SLURM_STEP_NODELIST=localhost SLURM_STEP_TASKS_PER_NODE=1 SLURM_PROCID=0 SLURM_JOB_ID=36 \
  CUDA_VISIBLE_DEVICES="${gpus:-0}" timeout 120 "$python" -m hpc_train bootstrap -- "$python" -c "$rank_probe" 2>&1
echo "-> exit $?"
