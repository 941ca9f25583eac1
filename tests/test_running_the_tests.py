"""The test suite run from a Python without the project's dependencies says what to run instead."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_python_without_the_dependencies_is_told_to_use_env_test_sh_in_one_line(tmp_path: Path) -> None:
    # As a system Python would be: hostlist cannot be imported (sitecustomize blocks it before pytest starts).
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['hostlist'] = None\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/bootstrap/test_nodelist.py"],
                         cwd=ROOT, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)}, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 2, run.stdout[-3000:] + run.stderr[-3000:]
    assert "cannot import hostlist: run the tests with env/test.sh" in run.stdout + run.stderr
    assert "Traceback" not in run.stdout + run.stderr and "ERROR collecting" not in run.stdout
