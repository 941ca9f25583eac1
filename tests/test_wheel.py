"""Installed, not only checked out: a wheel in a fresh virtual environment runs every command, outside the tree.

The wheel is built from this checkout and installed without its dependencies;
those come from the project's own environment through a .pth path line (which
adds that folder to sys.path without running its own .pth files, so the
editable hpc_train there is not picked up).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpc_train.cli import SUBCOMMANDS
from tests.fake_slurm import without_slurm

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.tensorflow  # one command trains


def uv_with_pips_settings() -> tuple[list[str], dict[str, str] | None]:
    """uv's command and environment (pip's settings passed on), or ([], None) where pip must do it."""
    from tests.test_env_install import install as env_install

    install = env_install()
    environment = install.uv_environment(install.pip_settings()) if importlib.util.find_spec("uv") else None
    return ([sys.executable, "-m", "uv"], {**os.environ, **environment}) if environment is not None else ([], None)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The bin/ of a fresh venv holding hpc-train from a wheel."""
    import fcntl

    work = tmp_path_factory.mktemp("wheel")
    # uv where env/setup.sh could install with it (a fifth of pip's CPU: its build environment cached, its venv made
    # without ensurepip), given pip's settings as env/install.py gives them; the same wheel either way (setuptools).
    uv, uv_environment = uv_with_pips_settings()
    build = ([*uv, "build", "--wheel", "-q", "-o"] if uv else [sys.executable, "-m", "pip", "wheel", "--no-deps",
                                                              "-q", "-w"])
    # One build at a time in the checkout (its build/ folder): each xdist worker running a test here builds its own.
    with open("/tmp/hpc-train-wheel-build.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = subprocess.run([*build, str(work / "dist"), str(ROOT)], capture_output=True, text=True, timeout=300,
                               env=uv_environment)
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = (work / "dist").glob("hpc_train-*.whl")
    venv = [*uv, "venv", "-q", "--python", sys.executable] if uv else [sys.executable, "-m", "venv"]
    subprocess.run([*venv, str(work / "venv")], check=True, timeout=120)
    python = work / "venv" / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "project-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = [*uv, "pip", "install", "--python", str(python)] if uv else [str(python), "-m", "pip", "install"]
    installing = subprocess.run([*install, "--no-deps", "-q", str(wheel)], capture_output=True, text=True,
                                timeout=300, env=uv_environment)
    assert installing.returncode == 0, installing.stderr[-3000:]
    yield python.parent


def run(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**without_slurm(), "PATH": f"{bin_dir}:/usr/bin:/bin"}
    return subprocess.run([str(bin_dir / "hpc-train"), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_wheel_is_what_runs_not_the_checkout(installed: Path, tmp_path: Path) -> None:
    where = subprocess.run([str(installed / "python"), "-c", "import hpc_train; print(hpc_train.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(installed.parent)) and str(ROOT) not in where


def test_the_wheel_says_the_version_git_gave_it(installed: Path, tmp_path: Path) -> None:
    """setuptools-scm's version, one per commit (docs/development.md#versions), is what --version says."""
    said = run(installed, "--version", cwd=tmp_path).stdout.split()
    metadata = subprocess.run([str(installed / "python"), "-c", "import importlib.metadata as m; "
                               "print(m.version('hpc-train'))"], capture_output=True, text=True, check=True).stdout
    assert said[:2] == ["hpc-train", metadata.strip()] and said[2] == "(protocol", said
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    tagged = subprocess.run(["git", "-C", str(ROOT), "describe", "--exact-match", "--tags"], capture_output=True)
    if tagged.returncode != 0:  # between releases: the commit's hash in the local part, 0.1.devN+gHASH
        assert ".dev" in said[1] and head.startswith(said[1].split("+g", 1)[1].split(".")[0]), (said, head)


def test_every_command_starts_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    for name in SUBCOMMANDS:
        result = run(installed, name, "--help", cwd=tmp_path)
        assert result.returncode == 0 and "usage:" in result.stdout, (name, result.stderr)


def test_render_submit_and_init_work_outside_the_source_tree(installed: Path, tmp_path: Path) -> None:
    rendered = run(installed, "render", "--nodes", "2", "-o", "job.sbatch", cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    script = (tmp_path / "job.sbatch").read_text()
    assert f"export HPC_TRAIN_HOME={installed.parent}" in script  # the job activates this environment
    assert subprocess.run(["bash", "-n", str(tmp_path / "job.sbatch")]).returncode == 0
    dry = run(installed, "submit", "--nodes", "2", "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0 and "#SBATCH --nodes=2" in dry.stdout, dry.stderr
    made = run(installed, "init", "project", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert sorted(path.name for path in (tmp_path / "project").iterdir()) == ["README.md", "config.yaml", "job.sbatch",
                                                                            "task.py"]
    trained = run(installed, "train", "--config", "project/config.yaml", "--set", "strategy=none", "--set",
                  "epochs=1", "--output-dir", "out", cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert (tmp_path / "out" / "metrics.json").is_file()


def test_a_new_user_in_the_starter_project_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    """Issue 27, from a wheel: the task's own output folder, no start-up noise, one job name, the id alone on stdout
    (a dry run here), HPC_TRAIN_DATA_DIR, --keys that say what they do and a --help that points at init."""
    assert run(installed, "init", "myproject", cwd=tmp_path).returncode == 0
    project = tmp_path / "myproject"
    trained = run(installed, "train", "--task", "task.py", "--set", "epochs=1", cwd=project)
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert (project / "runs" / "task" / "metrics.json").is_file()  # runs/<the task's stem>, not runs/mnist
    assert not [line for line in trained.stderr.splitlines() if line.startswith(("I0000", "W0000", "E0000"))]
    assert "cuInit" not in trained.stderr and "All log messages before absl" not in trained.stderr
    dry = run(installed, "submit", "--nodes", "2", "--config", "config.yaml", "--dry-run", cwd=project)
    assert dry.returncode == 0 and "#SBATCH --job-name=myproject" in dry.stdout, dry.stderr
    env = {**without_slurm(), "PATH": f"{installed}:/usr/bin:/bin", "HPC_TRAIN_DATA_DIR": "/data/mnist"}
    rendered = subprocess.run([str(installed / "hpc-train"), "render", "--nodes", "2"], cwd=project, env=env,
                              capture_output=True, text=True, timeout=120)
    assert "data_dir: /data/mnist\n" in rendered.stdout, rendered.stderr
    keys = run(installed, "train", "--keys", cwd=tmp_path).stdout.splitlines()
    assert "# Images per replica per step; the global batch is this times the replicas." in keys
    helped = run(installed, "train", "--help", cwd=tmp_path).stdout
    assert "templates/" not in helped and "hpc-train init myproject" in helped
