"""The layout's rules, checked on the source: no import cycles, no private names across modules, no import up
the layers, Slurm's commands run by the Slurm client alone (hpc_train/slurm/client.py), metrics.json named by
runs/metrics.py alone, and the first floor's limits (root modules, module sizes, names)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from hpc_train.slurm.client import COMMANDS

PACKAGE = Path(__file__).resolve().parents[1] / "hpc_train"
SLURM_COMMANDS = set(COMMANDS)
SLURM_OWNER = "hpc_train.slurm.client"
# Modules that run a Slurm command as what they measure, not to talk to Slurm: bench submit times a raw sbatch.
MEASURING = {"hpc_train.bench.submit": {"sbatch"}}
# Lower layers never import higher ones (lazy imports included), and each folder is one layer of its own, so that
# "below" means the same for every pair of folders. Entry points (cli, train, demo, __main__) may import anything;
# so may the package root, which is the public face alone (test_the_package_root_is_its_public_face_alone).
# The rest sit in these layers, lowest first: what every side reads, the rank's start-up, images, what a job is (spec:
# pure, its image's runtimes read from images), Slurm, a site, the run folders, tracking, the data service, the run
# loop, tasks, the job around the ranks, the login side, a login node over ssh, the local cluster, the checks of a
# setup, the benchmarks.
LAYERS = [
    ("hpc_train.errors", "hpc_train.exitcodes", "hpc_train.config", "hpc_train.resources", "hpc_train.version"),
    ("hpc_train.bootstrap",),
    ("hpc_train.container",),
    ("hpc_train.spec",),
    ("hpc_train.slurm",),
    ("hpc_train.site",),
    ("hpc_train.runs",),
    ("hpc_train.utilization",),
    ("hpc_train.tracking",),
    ("hpc_train.data_service",),
    ("hpc_train.training",),
    ("hpc_train.tasks",),
    ("hpc_train.injob",),
    ("hpc_train.login",),
    ("hpc_train.remote",),
    ("hpc_train.localslurm",),
    ("hpc_train.doctor",),
    ("hpc_train.bench",),
]
ROOT = "hpc_train"
ENTRY_POINTS = {ROOT, "hpc_train.__main__", "hpc_train.train", "hpc_train.demo"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of every `import` and `from ... import` in the file, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
    return found


def edges() -> dict[str, set[str]]:
    """Module -> the hpc_train modules it imports (a `from package import module` counts as the module)."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for module, names in imports(path):
            if not module.startswith("hpc_train"):
                continue
            targets = [f"{module}.{item}" for item in names if f"{module}.{item}" in MODULES] or [module]
            graph[name].update(target for target in targets if target in MODULES and target != name)
    return graph


def layer(name: str) -> int | None:
    best = None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if name == prefix or name.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (index, len(prefix))
    return None if best is None else best[0]


def own_package(cycle: list[str]) -> bool:
    """A cycle through a package's own __init__ and its modules alone (the package offering their names)."""
    first = cycle[0]
    return first != "hpc_train" and all(part == first or part.startswith(first + ".") for part in cycle[1:])


def test_no_module_imports_another_that_imports_it_back() -> None:
    graph = edges()
    cycles = []
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                cycles.append(" -> ".join([*trail[trail.index(target):], target]))
            elif target not in state:
                visit(target, [*trail, target])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    # A package's __init__ importing its own modules is how a package offers its names, not a cycle.
    cycles = [cycle for cycle in cycles if not own_package(cycle.split(" -> "))]
    assert not cycles


def test_no_module_uses_another_modules_private_names() -> None:
    crossing = [f"{name} takes {item} from {module}" for name, path in MODULES.items()
                for module, names in imports(path) if module.startswith("hpc_train") and module != name
                for item in names if item.startswith("_") and not item.startswith("__")]
    attributes = []
    for name, path in MODULES.items():
        imported = {alias for module, names in imports(path) if module.startswith("hpc_train") for alias in names}
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Name) and node.value.id in imported):
                attributes.append(f"{name} uses {node.value.id}.{node.attr}")
    assert not crossing and not attributes


def test_no_import_runs_up_the_layers() -> None:
    upward = []
    for name, targets in edges().items():
        own = layer(name)
        if own is None:
            continue  # an entry point (cli, train, demo, __main__): it may use anything
        upward += [f"{name} imports {target}" for target in targets
                   if (other := layer(target)) is not None and other > own]
    assert not upward


@pytest.mark.parametrize("name", sorted(set(MODULES) - {SLURM_OWNER}))
def test_only_the_slurm_client_runs_slurms_commands(name: str) -> None:
    """A call given a list that starts with a Slurm command runs it from here, even through the client's `run`:
    the client names every command it runs (a method each), so that a transport sees them all in one place."""
    own = []
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        first = node.args[0]
        if (isinstance(first, ast.List) and first.elts and isinstance(first.elts[0], ast.Constant)
                and first.elts[0].value in SLURM_COMMANDS - MEASURING.get(name, set())):
            own.append(f"line {node.lineno}: {first.elts[0].value}")
    assert not own


def test_the_slurm_client_runs_commands_only_through_its_transport() -> None:
    """Neither subprocess nor this machine's PATH in the client: an ssh transport must be able to stand in."""
    used = {module for module, _ in imports(MODULES[SLURM_OWNER])}
    assert not used & {"shutil", "pathlib"}
    calls = [node.func.attr for node in ast.walk(ast.parse(MODULES[SLURM_OWNER].read_text()))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
             and isinstance(node.func.value, ast.Name) and node.func.value.id in ("subprocess", "shutil", "os")]
    assert set(calls) <= {"CompletedProcess"}


def test_each_folder_is_one_layer_of_its_own() -> None:
    """A layer names whole folders (or root modules), never a module of a folder: no folder split over two layers;
    above the root modules, one folder per layer."""
    assert all(prefix.count(".") == 1 for prefixes in LAYERS for prefix in prefixes)
    assert all(len(prefixes) == 1 and (PACKAGE / prefixes[0].split(".")[1]).is_dir() for prefixes in LAYERS[1:])
    assert all((PACKAGE / f"{prefix.split('.')[1]}.py").is_file() for prefix in LAYERS[0])


def test_the_layers_name_every_module_but_the_entry_points() -> None:
    unplaced = [name for name in MODULES if layer(name) is None and name not in ENTRY_POINTS
                and not name.startswith("hpc_train.cli")]
    assert not unplaced


METRICS_OWNER = "hpc_train.runs.metrics"


def names_of_the_metrics_file(source: str) -> list[int]:
    """Lines where code names metrics.json as a file: a string, or an f-string's end, that is a file name or a
    path ending in it ("metrics.json", "out/metrics.json", f"{folder}/metrics.json"). Prose that mentions the
    file ("the figures (metrics.json) of ...") and docstrings are not a path to open."""
    tree = ast.parse(source)
    # Docstrings, and the parts of f-strings (an f-string is judged by its end, once).
    skipped = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)} | {
        id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    found = []
    for node in ast.walk(tree):
        text = node.values[-1] if isinstance(node, ast.JoinedStr) and node.values else node
        if (isinstance(text, ast.Constant) and isinstance(text.value, str) and id(node) not in skipped
                and text.value.endswith("metrics.json") and " " not in text.value):
            found.append(node.lineno)
    return found


def test_the_metrics_file_check_finds_a_path_to_metrics_json_and_leaves_prose_alone() -> None:
    assert names_of_the_metrics_file(MODULES[METRICS_OWNER].read_text())  # METRICS_FILE = "metrics.json"
    assert names_of_the_metrics_file('import json\nfigures = json.loads((folder / "metrics.json").read_text())\n')
    assert names_of_the_metrics_file('path = f"{folder}/metrics.json"\n') == [1]
    assert names_of_the_metrics_file('print(f"  metrics: {folder / \'metrics.json\'}")\n') == [1]
    assert not names_of_the_metrics_file('"""Reads metrics.json"""\nhelp = "a figure of metrics.json\'s epochs"\n'
                                         'error = f"no run has {name} yet (metrics.json after each epoch)"\n')


@pytest.mark.parametrize("name", sorted(set(MODULES) - {METRICS_OWNER}))
def test_only_the_metrics_module_names_the_metrics_file(name: str) -> None:
    """metrics.json is written and read by hpc_train.runs.metrics alone: everything else asks it."""
    assert not names_of_the_metrics_file(MODULES[name].read_text())



def test_the_package_root_holds_at_most_nine_modules() -> None:
    """Its public face (__init__), the entry points (__main__, train, demo) and what every layer reads: errors,
    exitcodes, config, resources and version (the version and protocol, which the public face re-exports)."""
    assert len([path for path in PACKAGE.glob("*.py")]) <= 9


def test_the_package_root_is_its_public_face_alone() -> None:
    """No module imports the package root (it imports the rest: the version from version.py, `fit` and `report`
    from below when called), and the root imports nothing at import time but the version."""
    importers = [name for name, targets in edges().items() if ROOT in targets]
    tree = ast.parse(MODULES[ROOT].read_text())
    at_import = [node.module for node in tree.body if isinstance(node, ast.ImportFrom)]
    at_import += [alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names]
    assert not importers and at_import == ["hpc_train.version"]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_over_400_lines_and_the_trainer_not_over_300(name: str) -> None:
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= (300 if name == "hpc_train.training.trainer" else 400), f"{name}: {lines} lines"


def test_no_file_name_stands_for_three_modules() -> None:
    """A name says what a module holds: no three modules share one (their packages' __init__ aside)."""
    names = [path.name for path in PACKAGE.rglob("*.py") if path.name != "__init__.py"]
    assert not [name for name in set(names) if names.count(name) >= 3]


def test_the_rank_side_never_imports_the_cli_and_training_knows_no_mnist() -> None:
    graph = edges()
    upward = [f"{name} imports {target}" for name, targets in graph.items()
              if name.startswith(("hpc_train.training", "hpc_train.bootstrap", "hpc_train.tasks"))
              for target in targets if target.startswith("hpc_train.cli")]
    mnist = [f"{name} imports {target}" for name, targets in graph.items() if name.startswith("hpc_train.training")
             for target in targets if target.startswith("hpc_train.tasks.mnist")]
    assert not upward and not mnist


def test_the_architecture_page_names_every_module_in_its_folders_line() -> None:
    """docs/architecture.md's layout lists every module that exists: a root module by its file name, the others
    in their top folder's line (a subpackage's modules too), so that a new module is placed in the docs as well."""
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    layout = page.split("```\nhpc_train/\n", 1)[1].split("```", 1)[0]
    folders = {match.group(1): set(re.findall(r"\w+", match.group(0)))
               for match in re.finditer(r"^  (\w+)/.*$", layout, re.M)}
    missing = [str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py") if path.name != "__init__.py"
               and not (f"{path.name} " in layout if path.parent == PACKAGE
                        else path.stem in folders.get(path.relative_to(PACKAGE).parts[0], set()))]
    assert not missing
