#!/usr/bin/env bash
# The test command: on a fresh Linux machine, install what the tests need, then run them all.
#   env/test.sh                 # everything
#   env/test.sh -m "not tensorflow" -x   # any pytest arguments
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# Slurm's own scontrol (Debian's slurm-client) lets the node-list tests compare with Slurm.
if ! command -v scontrol >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "env/test.sh: installing slurm-client (scontrol) with apt-get" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-client >/dev/null
  else
    echo "env/test.sh: note: no scontrol, and no root apt-get to install it: Slurm's differential tests are skipped" >&2
  fi
fi

env/setup.sh test
exec .venv/bin/python -m pytest "$@"
