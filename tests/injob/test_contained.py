"""The job body's step with every rank in an image: the real body (`hpc-train job`) against a fake srun and a fake
apptainer on PATH, every argument of theirs checked; the run folder, working directory, snapshot, data and the job's
hpc-train mounted at the same paths. (Charliecloud for real, on a real Slurm: tests/e2e/test_containers.py.)"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import hpc_train
from hpc_train.container.runtime import Container
from hpc_train.injob.contained import mount_points
from tests.fake_slurm import FakeSlurm, Reply, without_slurm

PACKAGE = Path(hpc_train.__file__).resolve().parent
SITE, SCRIPTS = sysconfig.get_paths()["purelib"], sysconfig.get_paths()["scripts"]
NGC = "nvcr.io#nvidia/tensorflow:25.02-tf2-py3"


def run_body(tmp_path: Path, fake: FakeSlurm, *options: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    """The body of job 7 in tmp_path/work (its snapshot and data beside it), its ranks the trainer."""
    work, data, snapshot = (tmp_path / name for name in ("work", "data", "snapshot"))
    for folder in (work, data, snapshot):
        folder.mkdir()
    run_dir = work / "runs" / "x-7"
    env = {**without_slurm(), "PATH": fake.install(tmp_path / "bin")["PATH"], "SLURM_JOB_ID": "7",
           "SLURM_JOB_NAME": "x", "SLURM_JOB_NODELIST": "n[1-2]", "HPC_TRAIN_DATA_DIR": str(data),
           "HPC_TRAIN_SNAPSHOT": str(snapshot)}
    result = subprocess.run([sys.executable, "-m", "hpc_train", "job", "--run-dir", str(run_dir), "--nodes", "2",
                             *options, "--output", f"{run_dir}/logs/rank-%t.out", "--", "hpc-train", "train",
                             "--config", f"{run_dir}/config.yaml"],
                            cwd=work, env=env, capture_output=True, text=True, timeout=120)
    places = {"work": work, "run_dir": run_dir, "binds": ",".join(
        f"{path}:{path}" for path in sorted(map(str, (work, data, snapshot, PACKAGE, SITE, SCRIPTS))))}
    return result, places


def inside(runtime: str, run_dir: Path) -> list[str]:
    return ["env", f"HPC_TRAIN_CONTAINER={runtime}", f"HPC_TRAIN_CONTAINER_SITE={SITE}",
            f"HPC_TRAIN_CONTAINER_BIN={SCRIPTS}",
            f"PYTHONPATH={run_dir}/.hpc-train-python", "python3", "-u", "-m", "hpc_train", "train", "--config",
            f"{run_dir}/config.yaml"]


def test_pyxis_is_srun_s_own_options_and_the_rank_starts_hpc_train_with_the_image_s_python(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path / "fake", {"srun": "", "scontrol": "", "sacct": ""})
    result, places = run_body(tmp_path, fake, "--container", NGC, "--container-runtime", "pyxis")
    assert result.returncode == 0, result.stderr
    run_dir = places["run_dir"]
    [srun] = fake.calls("srun")
    assert srun.args == ["--kill-on-bad-exit=1", "--open-mode=append", f"--output={run_dir}/logs/rank-%t.out",
                         f"--task-epilog={run_dir.resolve()}/task-epilog.sh", f"--container-image={NGC}", f"--container-mounts={places['binds']}",
                         f"--container-workdir={places['work']}", *inside("pyxis", run_dir)]
    # The ranks' PYTHONPATH holds the job's hpc_train alone (nothing else of its environment shadows the image's).
    staged = run_dir / ".hpc-train-python"
    assert [path.name for path in staged.iterdir()] == ["hpc_train"] and (staged / "hpc_train").resolve() == PACKAGE


def test_apptainer_runs_each_rank_with_the_gpus_and_its_exit_code_comes_out_unchanged(tmp_path: Path) -> None:
    # srun runs its command (as one rank); apptainer records its words and exits as a rank stopped and saved does.
    fake = FakeSlurm(tmp_path / "fake", {"srun": Reply(shell='while [[ "$1" == --* ]]; do shift; done\nexec "$@"\n'),
                                         "apptainer": Reply(code=75), "scontrol": "", "sacct": ""})
    image = tmp_path / "tf.sif"
    image.touch()
    result, places = run_body(tmp_path, fake, "--container", str(image))  # (the runtime: the image's .sif)
    assert result.returncode == 75, result.stderr  # the rank's 75 (saved, to go on) is the job's: its requeue
    [apptainer] = fake.calls("apptainer")
    assert apptainer.args == ["exec", "--nv", "--bind", places["binds"], "--pwd", str(places["work"]), str(image),
                              *inside("apptainer", places["run_dir"])]


def test_an_image_no_runtime_is_known_for_ends_the_job_in_one_line(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path / "fake", {"srun": "", "scontrol": "", "sacct": ""})
    result, _ = run_body(tmp_path, fake, "--container", "/images/tf.img")
    assert result.returncode == 2 and not fake.calls("srun")
    assert result.stderr.strip().splitlines()[-1].startswith("hpc-train: error: --container /images/tf.img: which runtime")


def test_a_charliecloud_folder_image_gets_its_mount_points_and_a_hosts_file(tmp_path: Path) -> None:
    image = tmp_path / "image"
    (image / "etc").mkdir(parents=True)
    mount_points(image, ["/scratch/runs/x-7", "/data"])
    assert (image / "scratch" / "runs" / "x-7").is_dir() and (image / "data").is_dir()
    assert (image / "etc" / "hosts").is_file()


def test_a_read_only_image_without_a_mount_point_is_one_line_naming_the_fix(tmp_path: Path) -> None:
    import os

    from hpc_train.container.runtime import ContainerError

    if os.geteuid() == 0:
        pytest.skip("root writes a read-only folder")
    image = tmp_path / "image"
    image.mkdir()
    image.chmod(0o555)
    with pytest.raises(ContainerError, match=r"Charliecloud mounts /data only where the image has that folder.*"
                                             r"mkdir -p .*image/data$"):
        mount_points(image, ["/data"])


def test_pyxis_without_srun_is_refused_in_one_line() -> None:
    from hpc_train.container.runtime import ContainerError
    from hpc_train.injob.contained import refuse_outside_srun

    with pytest.raises(ContainerError, match="Pyxis starts ranks in an image only under srun"):
        refuse_outside_srun(Container(NGC, "pyxis"), under_slurm=False)
    refuse_outside_srun(Container(NGC, "pyxis"), under_slurm=True)
    refuse_outside_srun(Container("/i/tf.sif", "apptainer"), under_slurm=False)
