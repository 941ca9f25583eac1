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
echo "env/setup.sh: installing hpc-train[$extras] and TensorFlow into .venv (about a minute the first time)" >&2
"$root/.venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$root/.venv/bin/python" -m pip install --quiet --disable-pip-version-check --editable "$root[$extras]"
echo "env/setup.sh: ready: $root/.venv/bin/hpc-train" >&2
