#!/usr/bin/env bash
# The test command: on a fresh Linux machine, install what the tests need, then run them all.
#   env/test.sh                 # everything
#   env/test.sh -m "not tensorflow" -x   # any pytest arguments
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# A real Slurm (Debian's slurm-wlm and munge): the node-list tests compare with scontrol,
# and the end-to-end tests submit jobs to a local cluster that they start themselves.
# OpenSSH's server and rsync: the remotes' tests reach a login node through a real sshd they start.
# Charliecloud (ch-run) and debootstrap: tests/e2e/test_containers.py builds an image and runs every rank in it.
# nftables: tests/e2e/test_site_firewall.py guards a job's ports with the site kit (hpc_train/site/).
# apt-get installs them beside env/setup.sh's Python packages (both mostly download): about 20 s saved on a fresh
# machine.
apt_installer=""
if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1 \
    || [ ! -x /usr/sbin/sshd ] || ! command -v rsync >/dev/null 2>&1 || [ ! -x /usr/sbin/nft ] \
    || ! command -v ch-run >/dev/null 2>&1 || [ ! -x /usr/sbin/debootstrap ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "env/test.sh: installing slurm-wlm, munge, openssh-server, rsync, nftables, charliecloud-runtime and" \
      "debootstrap with apt-get" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge openssh-server \
      openssh-client rsync nftables charliecloud-runtime debootstrap >/dev/null) &
    apt_installer=$!
    trap 'kill "$apt_installer" 2>/dev/null || true' EXIT  # (a setup that fails stops it too)
  else
    echo "env/test.sh: note: no Slurm (or sshd, rsync, ch-run), and no root apt-get to install them: their tests are" \
      "skipped (the same scripts are still tested through hpc-train launch)" >&2
  fi
fi

# uv's cache first (env/install.py): the versions it resolved before, no index waited on; a fresh machine asks them.
HPC_TRAIN_UV_CACHE_FIRST=1 env/setup.sh test
if [ -n "$apt_installer" ]; then
  if ! wait "$apt_installer"; then
    echo "env/test.sh: error: apt-get could not install the packages above; run it by hand to see why" >&2
    exit 1
  fi
  trap - EXIT
fi
# The containers' test image (tests/e2e/charliecloud_image.py), when not built yet: debootstrap in the background,
# while the tests start, rather than on its test's worker (100 s of the longest cluster group on a fresh machine).
# The test waits for it, and says why where it could not be built.
if command -v ch-run >/dev/null 2>&1 && [ ! -e /tmp/hpc-train-ch-image/usr/bin/python3 ]; then
  .venv/bin/python tests/e2e/charliecloud_image.py >/dev/null 2>&1 &
fi
# Every rank, server and command of the tests' jobs imports hpc_train (and the task modules and examples they run)
# afresh: their bytecode compiled once here, where PYTHONDONTWRITEBYTECODE (set on the machines here) would have
# each process compile it again. (A syntax error stops here, named by compileall, before any test.)
.venv/bin/python -m compileall -q hpc_train examples tests/training/tasks
# Side by side in pytest-xdist workers: 5 on 2 cores or more, a worker for each of the four groups of tests on local
# clusters (tests/clustergroups.py: each group's tests in one worker, in order) and one for the rest (which fill the
# cluster workers' time too). The cluster tests spend much of their time waiting on Slurm and on their jobs, which the
# other workers fill: on 2 cores the CPU was 85-90% busy with 4 workers and 98% with 5, the suite 12-13 minutes
# instead of 14-15, the machine's memory in use at most 5 GiB (docs/development.md). HPC_TRAIN_TEST_WORKERS=0 runs
# everything in this one process; -n N overrides.
cores="$(nproc 2>/dev/null || echo 1)"
workers="${HPC_TRAIN_TEST_WORKERS:-$(( cores < 2 ? 0 : 5 ))}"
exec .venv/bin/python -m pytest -n "$workers" "$@"
