"""The step's ranks in an image (the edge of hpc_train/container/runtime.py): what this batch host has to mount, and
the job's hpc-train staged in the run folder for the ranks inside (docs/containers.md). The body itself (prologue,
epilogue, retries, watchdog, requeue, tracking) stays here, outside the image."""

from __future__ import annotations

import os
import shlex
import pwd
import sysconfig
from collections.abc import Mapping, Sequence
from pathlib import Path

from hpc_train.config import DATA_DIR_VARIABLE
from hpc_train.container.runtime import Container, Places, minimal_mounts, mounted_folders, wrapped
from hpc_train.injob.watchdog import config_setting

# The run folder's folder that holds only a link to the job's hpc_train package: the ranks' PYTHONPATH inside.
STAGED = ".hpc-train-python"


def staged_package(run_dir: Path) -> tuple[Path, Path]:
    """(the folder for PYTHONPATH, the hpc_train package it links to): the link made once, kept across attempts."""
    package = Path(__file__).resolve().parents[1]  # hpc_train/, this module's package's
    staged = run_dir.resolve() / STAGED
    staged.mkdir(parents=True, exist_ok=True)
    link = staged / "hpc_train"
    if not link.is_symlink() or link.resolve() != package:
        link.unlink(missing_ok=True)
        link.symlink_to(package)
    return staged, package


def container_step(container: Container, run_dir: Path, command: Sequence[str], env: Mapping[str, str],
                   also: Sequence[Path] = ()) -> tuple[list[str], list[str]]:
    """(srun's own options, each rank's command) for the step in `container`; the folders it mounts are those of
    mounted_folders that exist here (a missing one would fail the mount on every node), and `also` (a packed
    trial's sweep folder: its study)."""
    staged, package = staged_package(run_dir)
    site, scripts = sysconfig.get_paths()["purelib"], sysconfig.get_paths()["scripts"]
    data = [path for path in (env.get(DATA_DIR_VARIABLE), config_setting(command, "data_dir")) if path]
    workdir = os.getcwd()
    folders = mounted_folders(str(run_dir.resolve()), workdir, env, [str(Path(path).resolve()) for path in data],
                              str(package), site, scripts) + [str(path.resolve()) for path in also]
    user = None if env.get("USER") else pwd.getpwuid(os.getuid()).pw_name
    places = Places(minimal_mounts(folder for folder in folders if os.path.isdir(folder)), workdir, str(staged),
                    site, user, scripts if os.path.isdir(scripts) else None)
    if container.runtime == "charliecloud" and os.path.isdir(container.image):
        mount_points(Path(container.image), (*places.mounts, workdir))
    return wrapped(container, places, command)


def mount_points(image: Path, folders: Sequence[str]) -> None:
    """Charliecloud mounts a folder only where the image has one (its images are read-only): in a folder image,
    each is made once, and an empty /etc/hosts for ch-run to mount the node's over (a minimal image has none, and
    the ranks could not find one another by name). One line naming the folder when the image cannot be written."""
    for folder in folders:
        inside = image / folder.lstrip("/")
        try:
            inside.mkdir(parents=True, exist_ok=True)
            (image / "etc" / "hosts").touch(exist_ok=True)
        except OSError as error:
            from hpc_train.container.runtime import ContainerError

            raise ContainerError(f"{image}: Charliecloud mounts {folder} only where the image has that folder, and "
                                 f"it cannot be made ({error.strerror}); make it once: mkdir -p {shlex.quote(str(inside))}") from None


def refuse_outside_srun(container: Container, under_slurm: bool) -> None:
    """Pyxis is srun's plugin: ranks started here without Slurm (submit --local) cannot use it."""
    from hpc_train.container.runtime import ContainerError

    if container.runtime == "pyxis" and not under_slurm:
        raise ContainerError(f"--container {container.image}: Pyxis starts ranks in an image only under srun, and "
                             "this job runs its ranks here without Slurm; submit it to Slurm, or use an Apptainer or "
                             "Charliecloud image here")
