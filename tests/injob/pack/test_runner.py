"""The pack's edge, its pure parts: each trial's srun step, command, environment and ports; a trial's folder made
ready."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import yaml

from hpc_train.bootstrap.ports import trial_port_base
from hpc_train.config import TrainConfig, to_dict
from hpc_train.injob.pack.core import Slot, Start
from hpc_train.injob.pack.runner import (in_image, prepare_trial, rank_command, srun_arguments, trial_env,
                                        trial_folder)
from hpc_train.runs.requeue import PACKED, plan_requeue

PLAN = {"name": "sw", "command": ["python", "t.py", "--lr={lr}"], "strategy": "multiworker", "num_ps": 1,
        "max_requeues": 5, "keras": "auto", "command_signal": "USR1",
        "share": {"nodes": 1, "gpus": 2, "tasks": 2, "cpus": 4, "per_node": 2}}


def test_a_trials_step_asks_only_its_share_on_its_node() -> None:
    folder = Path("/runs/sw-42_3")
    words = srun_arguments(PLAN, Start(3, Slot(1, ("node7",)), 1), folder, ["cmd", "x"])
    assert words[:8] == ["--exact", "--nodes=1", "--ntasks=2", "--ntasks-per-node=2", "--nodelist=node7",
                         "--gres=gpu:2", "--cpus-per-task=4", "--kill-on-bad-exit=1"]
    assert "--output=/runs/sw-42_3/logs/rank-%t.out" in words and words[-2:] == ["cmd", "x"]
    assert "--task-epilog=/runs/sw-42_3/task-epilog.sh" in words  # each rank's own TMPDIR gone, however it ended


def test_a_trials_folder_is_the_element_folder_of_the_packs_job(tmp_path: Path) -> None:
    assert trial_folder(tmp_path / "sw-42", PLAN, 3) == tmp_path / "sw-42_3"


def test_a_trial_runs_its_command_with_its_values_under_the_bootstrap() -> None:
    words = rank_command(PLAN, Path("/f"), {"lr": 0.01})
    assert words[-4:] == ["--", "python", "t.py", "--lr=0.01"]
    assert "bootstrap" in words and "--supervise" in words
    trainer = rank_command({**PLAN, "command": None}, Path("/f"), {"lr": 0.01})
    assert trainer[-5:] == ["train", "--config", "/f/config.yaml", "--output-dir", "/f"]


def test_trials_side_by_side_get_ports_apart_and_their_values(tmp_path: Path) -> None:
    env = {"SLURM_JOB_ID": "42"}
    shares = [trial_env(env, PLAN, Start(index, Slot(index, ("n",)), 1), tmp_path, {"lr": 0.5}, 42, 4)
              for index in range(4)]
    bases = [int(share["HPC_TRAIN_PORT_BASE"]) for share in shares]
    assert len(set(bases)) == 4 and all(abs(a - b) >= 8 for a in bases for b in bases if a != b)
    assert shares[2]["HPC_TRAIN_TRIAL"] == "2" and shares[2]["HPC_TRAIN_SWEEP_LR"] == "0.5"
    assert shares[0][PACKED] == "1"
    next_job = {trial_port_base(43, slot, 4, 2) for slot in range(4)}
    assert not next_job & set(bases)  # the next job's trials meet none of these


def test_a_packed_trial_leaves_the_requeue_to_its_pack() -> None:
    plan = plan_requeue({"SLURM_JOB_ID": "42", PACKED: "1"}, 5)
    assert plan.job_id is None and "the pack requeues its job" in plan.reason


def test_the_gpu_note_wrapper_runs_the_command_through_a_real_shell(tmp_path: Path) -> None:
    hostile = "x'; touch PWNED #"
    words = srun_arguments(PLAN, Start(0, Slot(0, ("n",)), 1), tmp_path, ["echo", hostile])
    at = words.index("bash")
    result = subprocess.run(words[at:], cwd=tmp_path, capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": "node3", "SLURM_STEP_GPUS": "1"})
    assert result.stdout == hostile + "\n" and not (tmp_path / "PWNED").exists(), shlex.join(words[at:])
    assert (tmp_path / "step-gpus").read_text() == "node3 1\n"


def test_a_trial_starts_with_its_settings_in_config_yaml_its_own_keys_out_and_its_task_epilog(tmp_path: Path) -> None:
    """Issue 46: a command's own key (nap) goes to the command, not to config.yaml; the task epilog srun names is
    written in the trial's folder before its step."""
    run_dir = tmp_path / "sw-42"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(to_dict(TrainConfig())))
    plan = {**PLAN, "trials": [{"nap": 5, "seed": 3}], "pack": {"trial_gpus": 2}}
    assert prepare_trial(run_dir, plan, 0, {}) == {"nap": 5, "seed": 3}
    config = yaml.safe_load((tmp_path / "sw-42_0" / "config.yaml").read_text())
    assert config["seed"] == 3 and "nap" not in config
    assert os.access(tmp_path / "sw-42_0" / "task-epilog.sh", os.X_OK)


def test_a_packs_trial_runs_in_its_image_its_folder_and_the_sweeps_mounted(tmp_path: Path) -> None:
    run_dir, folder = tmp_path / "sw-42", tmp_path / "sw-42_3"
    for made in (run_dir, folder / "logs"):
        made.mkdir(parents=True)
    trainer = rank_command({**PLAN, "command": None}, folder, {})
    assert in_image(PLAN, run_dir, folder, trainer, {}) == ([], trainer)  # no image: as it is
    plan = {**PLAN, "command": None, "container": {"image": "/images/tf.sif", "runtime": "apptainer"}}
    options, command = in_image(plan, run_dir, folder, trainer, {"USER": "me"})
    assert options == [] and command[:2] == ["apptainer", "exec"]
    binds = command[command.index("--bind") + 1].split(",")  # (the tests' working directory is not above them)
    assert {f"{folder}:{folder}", f"{run_dir}:{run_dir}"} <= set(binds), binds
    assert f"PYTHONPATH={folder}/.hpc-train-python" in command  # the job's hpc_train, staged for the image
    assert command[command.index("python3"):] == ["python3", "-u", "-m", "hpc_train", "train", "--config",
                                                  str(folder / "config.yaml"), "--output-dir", str(folder)]
    # Pyxis: srun's own options, before the GPU note's wrapper, which then runs in the image.
    pyxis = {**plan, "container": {"image": "nvcr.io#nvidia/tensorflow:25.02-tf2-py3", "runtime": "pyxis"}}
    options, command = in_image(pyxis, run_dir, folder, trainer, {"USER": "me"})
    words = srun_arguments(pyxis, Start(3, Slot(1, ("node7",)), 1), folder, command, options)
    assert words.index("--container-image=nvcr.io#nvidia/tensorflow:25.02-tf2-py3") < words.index("bash")
    assert words[words.index("bash") + 4:][:2] == ["env", "HPC_TRAIN_CONTAINER=pyxis"]


def test_a_trial_in_an_image_gets_its_command_intact_through_a_real_shell(tmp_path: Path) -> None:
    hostile = "x'; touch PWNED #"
    run_dir, folder = tmp_path / "sw-42", tmp_path / "sw-42_0"
    for made in (run_dir, folder):
        made.mkdir()
    (tmp_path / "bin").mkdir()
    runtime = tmp_path / "bin" / "apptainer"  # the runtime: here, it says what it was asked to run
    runtime.write_text('#!/bin/bash\nprintf "%s\\n" "$@"\n')
    runtime.chmod(0o755)
    plan = {**PLAN, "container": {"image": "/images/tf.sif", "runtime": "apptainer"}}
    options, command = in_image(plan, run_dir, folder, ["echo", hostile], {"USER": "me"})
    words = srun_arguments(plan, Start(0, Slot(0, ("n",)), 1), folder, command, options)
    result = subprocess.run(words[words.index("bash"):], cwd=tmp_path, capture_output=True, text=True,
                            env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "SLURMD_NODENAME": "node3"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-2:] == ["echo", hostile] and not list(tmp_path.rglob("PWNED"))
    assert "/images/tf.sif" in result.stdout.splitlines()
