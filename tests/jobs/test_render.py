"""Rendered scripts: golden files, and hostile values run through a real shell."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from hpc_train.config import TrainConfig
from hpc_train.jobs.render import render_script
from hpc_train.jobs.spec import JobSpec

GOLDEN = Path(__file__).with_name("golden")
HOME = "/opt/hpc-train"
CASES = {
    "cpu_2_nodes": JobSpec(nodes=2),
    "1_node_8_gpus": JobSpec(nodes=1, gpus_per_node=8, time="2:00:00", partition="gpu"),
    "4_nodes_2_gpus": JobSpec(nodes=4, gpus_per_node=2, account="proj", qos="normal", cpus_per_task=8,
                              mem="64G", constraint="a100", exclusive=True, gres="gpu:2"),
    "parameter_server": JobSpec(nodes=2, gpus_per_node=2, strategy="parameter_server", num_ps=1, name="mnist-ps"),
}
HOSTILE = ["x'; touch PWNED #", "$(touch PWNED)", "`touch PWNED`", 'a "quoted" name', "semi;colon && touch PWNED"]


@pytest.mark.parametrize("case", CASES)
def test_rendered_scripts_match_their_golden_files(case: str) -> None:
    """Regenerate after an intended change with: UPDATE_GOLDEN=1 pytest tests/jobs/test_render.py"""
    rendered = render_script(CASES[case], TrainConfig(), HOME)
    golden = GOLDEN / f"{case}.sbatch"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(rendered)
    assert rendered == golden.read_text()


def mock_srun(bin_dir: Path) -> None:
    """An srun that runs its command once, as rank 0, and records the arguments it got."""
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text('#!/bin/bash\nprintf "%s\\n" "$@" > "$SRUN_ARGS"\n'
                    'while [[ "$1" == --* ]]; do shift; done\nexec "$@"\n')
    srun.chmod(srun.stat().st_mode | stat.S_IEXEC)
    apptainer = bin_dir / "apptainer"  # `apptainer exec --nv IMAGE CMD...`: record, then run CMD
    apptainer.write_text('#!/bin/bash\nprintf "%s\\n" "$@" > "$APPTAINER_ARGS"\nshift 3\nexec "$@"\n')
    apptainer.chmod(apptainer.stat().st_mode | stat.S_IEXEC)
    fake = bin_dir / "hpc-train"  # the trainer itself: record what it was asked to do
    fake.write_text('#!/bin/bash\nprintf "%s\\n" "$@" > "$TRAIN_ARGS"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_values_create_no_file_in_a_real_shell(hostile: str, tmp_path: Path) -> None:
    mock_srun(tmp_path / "bin")
    spec = JobSpec(nodes=2, name=hostile.replace("/", ""), partition=hostile, account=hostile,
                   container=f"/images/{hostile}.sif")
    train = TrainConfig(data_dir=f"/data/{hostile}", output_dir=hostile)
    script = tmp_path / "job.sbatch"
    script.write_text(render_script(spec, train, home=str(tmp_path / hostile)))
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "SLURM_JOB_ID": "7",
           "SLURM_JOB_NAME": spec.name, "SLURM_JOB_NODELIST": "n[1-2]", "SRUN_ARGS": str(tmp_path / "srun.args"),
           "APPTAINER_ARGS": str(tmp_path / "apptainer.args"), "TRAIN_ARGS": str(tmp_path / "train.args")}
    result = subprocess.run(["bash", str(script)], cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert not list(tmp_path.rglob("PWNED")), "a value was run as a command"
    run_dir = work / "runs" / f"{spec.name}-7"
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["data_dir"] == f"/data/{hostile}"
    assert (tmp_path / "apptainer.args").read_text().splitlines()[:3] == ["exec", "--nv", f"/images/{hostile}.sif"]
    assert (tmp_path / "srun.args").read_text().splitlines()[:2] == [
        "--kill-on-bad-exit=1", f"--output=runs/{spec.name}-7/logs/rank-%t.out"]
    train_args = (tmp_path / "train.args").read_text().splitlines()
    assert train_args == ["train", "--config", f"runs/{spec.name}-7/config.yaml", "--output-dir",
                          f"runs/{spec.name}-7"]


@pytest.mark.parametrize("script, spec", [
    ("mnist_2node.sh", JobSpec(nodes=2, name="mnist-2node", cpus_per_task=2, time="00:30:00")),
    ("mnist_ps.sh", JobSpec(nodes=2, cpu_tasks_per_node=2, strategy="parameter_server", name="mnist-ps",
                            cpus_per_task=1, time="00:30:00")),
    ("mnist_1node_mirrored.sh", JobSpec(nodes=1, name="mnist-mirrored", cpus_per_task=2, time="00:30:00")),
])
def test_the_hand_written_scripts_ask_what_render_would(script: str, spec: JobSpec) -> None:
    from hpc_train.jobs.render import directives

    text = (Path(__file__).resolve().parents[2] / "slurm" / script).read_text()
    active = dict(line.removeprefix("#SBATCH --").partition("=")[::2] for line in text.splitlines()
                  if line.startswith("#SBATCH --"))
    assert active == {name: str(value) for name, value in directives(spec).items()}
