"""User task modules for the tests: standalone files, as a user's are (hpc-train loads a task by its path).

A test names one by its path here and imports it only inside the test that runs it in-process: a task module
imports TensorFlow, and one imported at a test file's top made every pytest-xdist worker import TensorFlow (and
Keras 3 with it) while collecting, 3.5 s of CPU each, workers that run no TensorFlow test included."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REGRESSION = HERE / "regression.py"
SLOW_INPUT = HERE / "slow_input.py"
HANGING_ONCE = HERE / "hanging_once.py"


def constant(task: Path, name: str) -> Any:
    """A task module's constant (a literal assigned at its top level), read from its source without importing it."""
    for statement in ast.parse(task.read_text()).body:
        if isinstance(statement, ast.Assign) and any(isinstance(target, ast.Name) and target.id == name
                                                     for target in statement.targets):
            return ast.literal_eval(statement.value)
    raise LookupError(f"{task.name} assigns no literal {name}")
