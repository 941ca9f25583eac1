"""pyproject promises Python 3.10: nothing in hpc_train may take a name only 3.11+ has from the standard library."""
import ast
from pathlib import Path

import hpc_train

NEWER = {("contextlib", "chdir"), ("datetime", "UTC"), ("typing", "Self"), ("enum", "StrEnum")}


def test_no_module_imports_a_python_311_only_name() -> None:
    found = []
    for path in Path(hpc_train.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                found += [f"{path.name}: {node.module}.{a.name}" for a in node.names if (node.module, a.name) in NEWER]
    assert not found


def test_chdir_returns_to_where_it_was(tmp_path: Path) -> None:
    import os

    from hpc_train.login.submission import chdir

    before = os.getcwd()
    with chdir(tmp_path):
        assert Path.cwd() == tmp_path.resolve()
    assert os.getcwd() == before
