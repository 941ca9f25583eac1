"""Which runtime runs an image, what is mounted, and each runtime's command line for one rank (the pure core)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from hpc_train.container.inside import TENSORFLOW_BELOW, TENSORFLOW_FROM, installed_tensorflow, tensorflow_problem
from hpc_train.container.runtime import (Container, ContainerError, Places, choose_runtime, hpc_train_launcher,
                                         image_problem, inside_command, minimal_mounts, registry_name, wrapped)

pytestmark = pytest.mark.quick
ROOT = Path(__file__).resolve().parents[2]
PLACES = Places(("/data/mnist", "/scratch/runs/x-7"), "/scratch/runs/snapshots/ab/files/proj",
                "/scratch/runs/x-7/.hpc-train-python", "/venv/lib/python3.11/site-packages")


@pytest.mark.parametrize(("image", "is_dir", "runtime"), [
    ("/images/tf.sif", False, "apptainer"), ("/images/tf-sandbox", True, "apptainer"),
    ("/images/tf.sqsh", False, "pyxis"), ("nvcr.io#nvidia/tensorflow:25.02-tf2-py3", False, "pyxis"),
    ("ubuntu:22.04", False, "pyxis"), ("docker://nvcr.io/nvidia/tensorflow:25.02-tf2-py3", False, "pyxis")])
def test_the_image_says_its_runtime(image: str, is_dir: bool, runtime: str) -> None:
    assert choose_runtime(image, None, is_dir) == Container(image, runtime)


def test_a_named_runtime_wins_and_an_unknown_one_or_image_is_one_line() -> None:
    assert choose_runtime("/images/tf", "charliecloud", True).runtime == "charliecloud"
    assert choose_runtime("/images/tf.sqfs", "charliecloud", False).runtime == "charliecloud"
    with pytest.raises(ContainerError, match=r"^--container-runtime 'docker': expected one of apptainer, pyxis, "
                                             r"charliecloud$"):
        choose_runtime("/images/tf.sif", "docker", False)
    with pytest.raises(ContainerError, match="which runtime runs it?.*--container-runtime apptainer|pyxis|charl"):
        choose_runtime("/images/tf.img", None, False)


def test_registry_names_are_not_paths() -> None:
    assert [registry_name(name) for name in ("nvcr.io#nvidia/tensorflow:25.02-tf2-py3", "ubuntu:22.04",
                                             "me@nvcr.io#nvidia/tensorflow:1", "/images/tf.sqsh", "./tf.sqsh",
                                             "tf.sif", "images/tf", "tf")] == [True, True, True, False, False, False,
                                                                              False, False]


def test_a_missing_image_file_is_refused_a_registry_name_never() -> None:
    assert "no such image file" in image_problem(Container("/images/tf.sif", "apptainer"), exists=False)
    assert image_problem(Container("/images/tf.sif", "apptainer"), exists=True) is None
    assert image_problem(Container("nvcr.io#nvidia/tensorflow:25.02-tf2-py3", "pyxis"), exists=False) is None
    assert image_problem(Container("docker://tensorflow/tensorflow:2.19.0", "apptainer"), exists=False) is None


def test_a_folder_inside_a_mounted_one_is_not_mounted_again() -> None:
    assert minimal_mounts(["/a/b/runs/x-1", "/a/b", "/c", "/a/bc", "/c", "/a/b/d"]) == ("/a/b", "/a/bc", "/c")


def test_hpc_train_started_any_way_is_started_by_the_images_python() -> None:
    assert hpc_train_launcher(["hpc-train", "train"]) == 1
    assert hpc_train_launcher(["/venv/bin/hpc-train", "train"]) == 1
    assert hpc_train_launcher(["/venv/bin/python", "-u", "-m", "hpc_train", "train"]) == 4
    assert hpc_train_launcher(["python3", "-m", "hpc_train.train", "--config", "c"]) == 3
    assert hpc_train_launcher(["python", "train.py"]) == 0
    assert hpc_train_launcher(["python", "-m", "hpc_trainer"]) == 0
    assert inside_command(["/venv/bin/python", "-m", "hpc_train.doctor.step", "--timeout", "5"], PLACES,
                          "pyxis")[-6:] == ["python3", "-u", "-m", "hpc_train.doctor.step", "--timeout", "5"]
    assert inside_command(["/venv/bin/python", "-m", "hpc_train.train", "--config", "c.yaml"], PLACES,
                          "apptainer") == [
        "env", "HPC_TRAIN_CONTAINER=apptainer", "HPC_TRAIN_CONTAINER_SITE=/venv/lib/python3.11/site-packages",
        "PYTHONPATH=/scratch/runs/x-7/.hpc-train-python", "python3", "-u", "-m", "hpc_train", "train", "--config",
        "c.yaml"]
    assert inside_command(["bash", "run.sh"], PLACES, "pyxis")[-2:] == ["bash", "run.sh"]
    with_scripts = Places(PLACES.mounts, PLACES.workdir, PLACES.pythonpath, PLACES.site, scripts="/venv/bin")
    assert "HPC_TRAIN_CONTAINER_BIN=/venv/bin" in inside_command(["hpc-train", "train"], with_scripts, "apptainer")


def test_each_runtime_runs_the_rank_with_the_gpus_the_mounts_and_the_folder() -> None:
    command = ["hpc-train", "train", "--config", "c.yaml"]
    inside = inside_command(command, PLACES, "charliecloud")
    binds = "/data/mnist:/data/mnist,/scratch/runs/x-7:/scratch/runs/x-7"
    assert wrapped(Container("/i/tf.sif", "apptainer"), PLACES, command) == ([], [
        "apptainer", "exec", "--nv", "--bind", binds, "--pwd", PLACES.workdir, "/i/tf.sif",
        *inside_command(command, PLACES, "apptainer")])
    assert wrapped(Container("nvcr.io#nvidia/tensorflow:25.02-tf2-py3", "pyxis"), PLACES, command) == (
        ["--container-image=nvcr.io#nvidia/tensorflow:25.02-tf2-py3", f"--container-mounts={binds}",
         f"--container-workdir={PLACES.workdir}"], inside_command(command, PLACES, "pyxis"))
    assert wrapped(Container("/i/tf", "charliecloud"), PLACES, command) == ([], [
        "ch-run", "--home", "-b", "/data/mnist:/data/mnist", "-b", "/scratch/runs/x-7:/scratch/runs/x-7", "--cd",
        PLACES.workdir, "/i/tf", "--", *inside])
    nobody = Places(PLACES.mounts, PLACES.workdir, PLACES.pythonpath, PLACES.site, user="alice")
    assert wrapped(Container("/i/tf", "charliecloud"), nobody, command)[1][:3] == ["env", "USER=alice", "ch-run"]


def test_a_path_the_mount_option_cannot_carry_is_refused_in_one_line() -> None:
    places = Places(("/data/a,b",), "/w", "/w/p", "/s")
    with pytest.raises(ContainerError, match=r"^/data/a,b: a folder the ranks need in the image holds"):
        wrapped(Container("/i/tf.sif", "apptainer"), places, ["hpc-train", "train"])


def test_hostile_paths_reach_the_runtime_as_single_words_through_a_shell(tmp_path: Path) -> None:
    hostile = "/data/a b'; echo pwned $(id) \""
    places = Places((hostile,), hostile, f"{hostile}/p", "/s")
    _, argv = wrapped(Container(f"{hostile}.sif", "apptainer"), places, ["hpc-train", "train"])
    echoed = subprocess.run(["bash", "-c", f"printf '%s\\n' {shlex.join(argv)}"], capture_output=True, text=True,
                            check=True).stdout.splitlines()
    assert echoed == argv  # nothing split, nothing run: $(id) reached it as text


def test_the_tensorflow_range_is_pyprojects() -> None:
    low, high = (".".join(map(str, version)) for version in (TENSORFLOW_FROM, TENSORFLOW_BELOW))
    assert f'"tensorflow>={low},<{high}"' in (ROOT / "pyproject.toml").read_text()


def test_a_tensorflow_hpc_train_cannot_use_is_one_line_naming_both_versions() -> None:
    assert tensorflow_problem("2.19.0", "0.1.dev5", "apptainer") is None
    assert tensorflow_problem("2.21.1rc0", "0.1.dev5", "apptainer") is None
    line = tensorflow_problem("2.12.0", "0.1.dev5", "pyxis")
    assert line == ("hpc-train 0.1.dev5: the pyxis image's TensorFlow 2.12.0 is not one it can use (it needs "
                    "TensorFlow >=2.16,<2.22); use an image with one, or an hpc-train made for TensorFlow 2.12.0")
    assert "no TensorFlow in the charliecloud image" in tensorflow_problem(None, "0.1", "charliecloud")


def test_tensorflows_version_is_read_from_any_of_its_distributions() -> None:
    from importlib.metadata import PackageNotFoundError

    def version(name: str) -> str:
        if name == "tensorflow-cpu":
            return "2.17.0"
        raise PackageNotFoundError(name)

    assert installed_tensorflow(version) == "2.17.0"
    assert installed_tensorflow(lambda name: (_ for _ in ()).throw(PackageNotFoundError(name))) is None
