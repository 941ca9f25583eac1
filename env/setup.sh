#!/usr/bin/env bash
# Create .venv in the project and install hpc-train into it (editable) with its dependencies.
#   env/setup.sh            # with the test tools (pytest, hypothesis, mkdocs)
#   env/setup.sh test       # any extras of pyproject.toml (comma-separated)
# PYTHON=python3.11 env/setup.sh picks the interpreter (3.10 or newer).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
extras="${1:-test}"
python="${PYTHON:-python3}"

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "env/setup.sh: error: hpc-train needs Python 3.10 or newer, '$python' is $("$python" -V 2>&1 || echo missing); set PYTHON=python3.11" >&2
  exit 2
fi
if [ ! -x "$root/.venv/bin/python" ]; then
  echo "env/setup.sh: creating $root/.venv" >&2
  "$python" -m venv "$root/.venv"
fi
# What this install is of: the extras, pyproject.toml, and the commit (the version comes from git). Installed already
# and unchanged: nothing to do. (A reinstall under a running suite, env/demo.sh's from tests/test_demo.py, left
# hpc_train unimportable for the moment pip takes, and another test's `python -m hpc_train` failed.)
stamp="$root/.venv/.hpc-train-setup"
wanted="$extras $(sha256sum "$root/pyproject.toml" | cut -d' ' -f1) $(git -C "$root" rev-parse HEAD 2>/dev/null || echo no-git)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ] && "$root/.venv/bin/python" -c 'import hpc_train' 2>/dev/null; then
  echo "env/setup.sh: ready (already installed): $root/.venv/bin/hpc-train" >&2
  exit 0
fi
echo "env/setup.sh: installing hpc-train[$extras] and TensorFlow into .venv (half a minute to a minute the first time)" >&2
"$root/.venv/bin/python" "$root/env/install.py" "$root" "$extras"  # with uv where it can be had, else pip
echo "$wanted" > "$stamp"
echo "env/setup.sh: ready: $root/.venv/bin/hpc-train" >&2
