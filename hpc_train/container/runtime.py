"""Which runtime runs an image, and the command line that runs one rank in it (pure; docs/containers.md).

The job body stays on the batch host; what srun starts on each rank is wrapped:

- Apptainer (Singularity): `apptainer exec --nv --bind P:P,... --pwd CWD IMAGE env ... python3 -u -m hpc_train ...`
- Charliecloud: `ch-run --home -b P:P ... --cd CWD IMAGE -- env ... python3 -u -m hpc_train ...` (ch-run execs the command:
  the rank is srun's task itself, so Slurm's signals reach it and its exit code is the task's)
- Pyxis: srun's own options (`--container-image`, `--container-mounts`, `--container-workdir`); the rank's command
  is the same `env ... python3 -u -m hpc_train ...`, which the plugin starts in the image.

Inside, the image's `python3` runs hpc-train: the job's hpc_train package is mounted at its own path and put first
on PYTHONPATH (through a folder holding only a link to it, so that nothing else of the job's environment shadows the
image's), and the job's site-packages are mounted and added *after* the image's own (hpc_train/__main__.py, through
HPC_TRAIN_CONTAINER_SITE): the image's TensorFlow wins, and what the image lacks (python-hostlist, PyYAML) comes
from the job. The run folder, the working directory (the code snapshot's copy), the snapshot and the data
directories are mounted at the same paths.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from hpc_train.errors import HpcTrainError

RUNTIMES = ("apptainer", "pyxis", "charliecloud")
# The variable every rank started in an image has (its runtime's name): what `inside` reads, and a test's witness.
IN_CONTAINER = "HPC_TRAIN_CONTAINER"
# The job's site-packages inside the image: added after the image's own (hpc_train/__main__.py).
JOB_SITE = "HPC_TRAIN_CONTAINER_SITE"
# The job's scripts folder inside the image (its py-spy, which reads a hung command's stacks: injob/pyspy.py).
JOB_BIN = "HPC_TRAIN_CONTAINER_BIN"
# The executable each runtime needs on the nodes (Pyxis is srun's plugin: srun itself).
EXECUTABLES = {"apptainer": "apptainer", "charliecloud": "ch-run", "pyxis": "srun"}
# Enroot's image names as Pyxis takes them: [USER@][REGISTRY#]IMAGE[:TAG], e.g. nvcr.io#nvidia/tensorflow:25.02-tf2-py3.
_REGISTRY_NAME = re.compile(r"^(docker://)?([\w.-]+@)?([\w.:-]+#)?[\w.-]+(/[\w.-]+)*(:[\w.-]+)?$")


class ContainerError(HpcTrainError):
    """An image or runtime hpc-train cannot run ranks in, with the fix."""


@dataclass(frozen=True)
class Container:
    """An image, and the runtime that runs each rank in it."""

    image: str
    runtime: str

    def __post_init__(self) -> None:
        if self.runtime not in RUNTIMES:
            raise ContainerError(f"--container-runtime {self.runtime!r}: expected one of {', '.join(RUNTIMES)}")

    @property
    def is_file(self) -> bool:
        """An image on disk (a .sif, a .sqsh, a directory), not a registry's name Pyxis pulls nor a URI Apptainer
        does (docker://, oras://, library://)."""
        return "://" not in self.image and not (self.runtime == "pyxis" and registry_name(self.image))


def registry_name(image: str) -> bool:
    """Whether `image` reads as a registry's image name (Pyxis pulls it) rather than a path on disk (pure)."""
    if image.startswith(("docker://", "#")) or "#" in image:
        return True
    return not image.startswith(("/", ".", "~")) and not image.endswith((".sif", ".sqsh", ".sqfs", ".squashfs")) \
        and ":" in image and _REGISTRY_NAME.match(image) is not None


def choose_runtime(image: str, named: str | None, is_dir: bool) -> Container:
    """The container for `--container IMAGE [--container-runtime NAME]` (pure: `is_dir`, whether IMAGE is a folder).

    Named wins; else by the image: a .sif file or a folder (a sandbox) is Apptainer's, a .sqsh file or a registry
    name Pyxis's; Charliecloud's folders and SquashFS images are named (a folder reads as a sandbox)."""
    if named is not None:
        return Container(image, named)
    if image.endswith(".sif") or is_dir:
        return Container(image, "apptainer")
    if image.endswith(".sqsh") or registry_name(image):
        return Container(image, "pyxis")
    raise ContainerError(f"--container {image}: which runtime runs it? A .sif file or a sandbox folder is "
                         "Apptainer's, a .sqsh file or a registry name (nvcr.io#nvidia/tensorflow:TAG) Pyxis's; "
                         f"else name it: --container-runtime {'|'.join(RUNTIMES)}")


def image_problem(container: Container, exists: bool) -> str | None:
    """Preflight's line for an image file that is not there (`exists`: whether the path is) (pure)."""
    if not container.is_file or exists:
        return None
    return (f"--container {container.image}: no such image file or folder ({container.runtime}); give the path of "
            "the image as the nodes see it (a shared file system), or a registry name for Pyxis")


@dataclass(frozen=True)
class Places:
    """What a rank sees inside the image: the host folders mounted at the same paths, where it starts, and where the
    job's hpc-train is (`pythonpath`: a folder holding only a link to the hpc_train package; `site`: the job's
    site-packages, added after the image's own)."""

    mounts: tuple[str, ...]
    workdir: str
    pythonpath: str
    site: str
    user: str | None = None  # ch-run needs $USER: the user's name when the step's environment has none
    scripts: str | None = None  # the job's scripts folder (its py-spy), mounted


def minimal_mounts(paths: Iterable[str]) -> tuple[str, ...]:
    """The folders to mount, each once: one inside another already mounted is seen through it (pure)."""
    kept: list[PurePosixPath] = []
    for path in sorted({PurePosixPath(path) for path in paths}, key=lambda path: len(path.parts)):
        if not any(path == mounted or mounted in path.parents for mounted in kept):
            kept.append(path)
    return tuple(sorted(str(path) for path in kept))


def check_mountable(container: Container, paths: Iterable[str]) -> None:
    """Refuse a path the runtime's mount option cannot carry (`:` and `,` separate its fields)."""
    for path in paths:
        if ":" in path or "," in path:
            raise ContainerError(f"{path}: a folder the ranks need in the image holds ':' or ',', which "
                                 f"{container.runtime}'s mount option cannot carry; move it to a path without them")


def inside_command(command: Sequence[str], places: Places, runtime: str) -> list[str]:
    """The rank's command as it runs in the image (pure): hpc-train started by the image's python3 (`hpc-train ...`
    or `PYTHON [-u] -m hpc_train ...` become `python3 -u -m hpc_train ...`), under `env` that tells it where it is
    and where the job's hpc-train and site-packages are. Any other command runs as it is, under the same `env`."""
    command = list(command)
    launcher = hpc_train_launcher(command)
    # (`-m hpc_train.train ARGS` is `hpc-train train ARGS`: through __main__, which checks the image first; another
    # module of hpc-train's, doctor's step, checks it itself)
    module = command[launcher - 1] if launcher > 1 else "hpc_train"
    start = ["hpc_train", "train"] if module == "hpc_train.train" else [module]
    rank = ["python3", "-u", "-m", *start, *command[launcher:]] if launcher else command
    scripts = [f"{JOB_BIN}={places.scripts}"] if places.scripts else []
    return ["env", f"{IN_CONTAINER}={runtime}", f"{JOB_SITE}={places.site}", *scripts,
            f"PYTHONPATH={places.pythonpath}", *rank]


def hpc_train_launcher(command: Sequence[str]) -> int:
    """How many of the command's first words start hpc-train (`hpc-train`, `PYTHON [-u] -m hpc_train[.MODULE]`);
    0: none (pure)."""
    if command and PurePosixPath(command[0]).name == "hpc-train":
        return 1
    for at in range(1, min(len(command), 4)):
        if command[at] == "-m" and at + 1 < len(command) and command[at + 1].split(".")[0] == "hpc_train":
            return at + 2 if all(word.startswith("-") for word in command[1:at]) else 0
    return 0


def wrapped(container: Container, places: Places, command: Sequence[str]) -> tuple[list[str], list[str]]:
    """(srun's own options, the command srun starts on each rank) that run `command` in the image (pure)."""
    check_mountable(container, (*places.mounts, places.workdir, container.image if container.is_file else ""))
    inside = inside_command(command, places, container.runtime)
    binds = ",".join(f"{path}:{path}" for path in places.mounts)
    if container.runtime == "pyxis":
        return [f"--container-image={container.image}", f"--container-mounts={binds}",
                f"--container-workdir={places.workdir}"], inside
    if container.runtime == "apptainer":
        return [], ["apptainer", "exec", "--nv", "--bind", binds, "--pwd", places.workdir, container.image, *inside]
    user = ["env", f"USER={places.user}"] if places.user else []
    mounts = [word for path in places.mounts for word in ("-b", f"{path}:{path}")]
    # --home: the user's home as Apptainer and Pyxis give it (caches, ~/.keras); a minimal image's /root is read-only
    return [], [*user, "ch-run", "--home", *mounts, "--cd", places.workdir, container.image, "--", *inside]


def mounted_folders(run_dir: str, workdir: str, env: Mapping[str, str], data_dirs: Iterable[str],
                    package_dir: str, site: str, scripts: str) -> list[str]:
    """Every host folder the ranks need at its own path (pure; the caller keeps those that exist): the run folder,
    the working directory, the code snapshot, the data, the job's hpc_train package, site-packages and scripts."""
    snapshot = env.get("HPC_TRAIN_SNAPSHOT")
    return [run_dir, workdir, *([snapshot] if snapshot else []), *data_dirs, package_dir, site, scripts]
