"""The doctor's test step on a node: what it finds of TensorFlow (the rest of its report is judged in test_checks.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest


@pytest.mark.tensorflow
def test_a_node_whose_tf_keras_does_not_import_still_reports_tensorflow_for_the_keras_check_to_judge() -> None:
    """tf-keras is judged by its own check (with its fix: `pip install tf-keras~=X`), not as "TensorFlow does not
    import": the step imports TensorFlow alone."""
    code = textwrap.dedent("""
        import json, sys
        sys.modules["tf_keras"] = None  # (Python's own way to make an import fail)
        from hpc_train.doctor.step import _tensorflow
        print(json.dumps(_tensorflow()))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert "tensorflow_error" not in report and report["tensorflow"].startswith("2."), report
