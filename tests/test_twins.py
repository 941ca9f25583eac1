"""Each mock twin names an end-to-end test that exists: a twin whose real test was renamed or merged away would be
skipped on every machine with a local cluster, its behaviour then tested nowhere (tests/conftest.py)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def twins() -> list[tuple[Path, str]]:
    """(the file holding a mock_twin mark, the test it names) for every mark in tests/."""
    found = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "mock_twin" and node.args:
                found.append((path, ast.literal_eval(node.args[0])))
    return found


def test_every_mock_twin_names_an_end_to_end_test_that_exists() -> None:
    assert twins(), "no mock_twin marks found: the search is broken"
    for path, named in twins():
        file, _, test = named.partition("::")
        target = ROOT / file
        assert target.is_file() and f"def {test}(" in target.read_text(), f"{path.name}: no {named}"
