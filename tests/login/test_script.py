"""Rendered scripts: golden files, and hostile values run through a real shell."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
import yaml

import hpc_train
from hpc_train.config import TrainConfig
from hpc_train.login.script import render_script
from hpc_train.spec.pack import Pack
from hpc_train.spec.request import JobSpec
from hpc_train.spec.sweep import Sweep, grid
from tests.fake_slurm import FakeSlurm, Reply, waiting_srun

GOLDEN = Path(__file__).with_name("golden")
HOME = "/opt/hpc-train"
CASES = {
    "cpu_2_nodes": JobSpec(nodes=2),
    "1_node_8_gpus": JobSpec(nodes=1, gpus_per_node=8, time="2:00:00", partition="gpu"),
    "4_nodes_2_gpus": JobSpec(nodes=4, gpus_per_node=2, account="proj", qos="normal", cpus_per_task=8,
                              mem="64G", constraint="a100", exclusive=True, gres="gpu:2"),
    "parameter_server": JobSpec(nodes=2, gpus_per_node=2, strategy="parameter_server", num_ps=1, name="mnist-ps"),
    "after_with_sbatch_options": JobSpec(nodes=2, dependency="afterany:1234_5", sbatch=(
        ("reservation", "maint"), ("exclude", "node[1-2]"), ("mail-user", "a@b.c"), ("mail-type", "END,FAIL"),
        ("contiguous", None))),
    # Every rank in an image, the body outside: the runtime chosen from the image (a .sif; a registry's name).
    "apptainer": JobSpec(nodes=2, gpus_per_node=4, container="/images/tensorflow.sif"),
    "pyxis": JobSpec(nodes=2, gpus_per_node=8, container="nvcr.io#nvidia/tensorflow:25.02-tf2-py3"),
}
HOSTILE = ["x'; touch PWNED #", "$(touch PWNED)", "`touch PWNED`", 'a "quoted" name', "semi;colon && touch PWNED"]


@pytest.mark.parametrize("case", CASES)
def test_rendered_scripts_match_their_golden_files(case: str) -> None:
    """Regenerate after an intended change with: UPDATE_GOLDEN=1 pytest tests/login/test_script.py"""
    rendered = render_script(CASES[case], TrainConfig(), HOME)
    golden = GOLDEN / f"{case}.sbatch"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(rendered)
    assert rendered == golden.read_text()


def fake_hpc_train(bin_dir: Path, body: str) -> None:
    """An hpc-train that runs `body` for the ranks' verbs, but is the real one for the job body (`hpc-train job`)."""
    fake = bin_dir / "hpc-train"
    fake.write_text(f'#!/bin/bash\nif [ "$1" = job ]; then exec {sys.executable} -m hpc_train "$@"; fi\n{body}')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)


def mock_srun(bin_dir: Path) -> FakeSlurm:
    """An srun that runs its command once, as rank 0 (its arguments recorded by the fake), and an apptainer that
    records its arguments."""
    fake = FakeSlurm(bin_dir / ".fake-slurm", {"srun": Reply(shell='while [[ "$1" == --* ]]; do shift; done\n'
                                                                  'exec "$@"\n')})
    fake.install(bin_dir)
    apptainer = bin_dir / "apptainer"  # `apptainer exec --nv IMAGE CMD...`: record, then run CMD
    apptainer.write_text('#!/bin/bash\nprintf "%s\\n" "$@" > "$APPTAINER_ARGS"\n')
    apptainer.chmod(apptainer.stat().st_mode | stat.S_IEXEC)
    fake_hpc_train(bin_dir, 'printf "%s\\n" "$@" > "$TRAIN_ARGS"\n')  # the trainer: record what it was asked
    return fake


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_values_create_no_file_in_a_real_shell(hostile: str, tmp_path: Path) -> None:
    fake = mock_srun(tmp_path / "bin")
    spec = JobSpec(nodes=2, name=hostile.replace("/", ""), partition=hostile, account=hostile,
                   container=f"/images/{hostile}.sif", sbatch=(("comment", hostile), ("mail-user", hostile)))
    train = TrainConfig(data_dir=f"/data/{hostile}", output_dir=hostile)
    script = tmp_path / "job.sbatch"
    script.write_text(render_script(spec, train, home=str(tmp_path / hostile)))
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "SLURM_JOB_ID": "7",
           "SLURM_JOB_NAME": spec.name, "SLURM_JOB_NODELIST": "n[1-2]",
           "APPTAINER_ARGS": str(tmp_path / "apptainer.args"), "TRAIN_ARGS": str(tmp_path / "train.args")}
    result = subprocess.run(["bash", str(script)], cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert not list(tmp_path.rglob("PWNED")), "a value was run as a command"
    run_dir = work / "runs" / f"{spec.name}-7"
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["data_dir"] == f"/data/{hostile}"
    # The rank, in the image: every argument (the mounts, its folder, hpc-train started by the image's Python).
    package, site, scripts = (Path(hpc_train.__file__).resolve().parent, sysconfig.get_paths()["purelib"],
                              sysconfig.get_paths()["scripts"])
    binds = ",".join(f"{path}:{path}" for path in sorted(map(str, {work, package, site, scripts})))
    assert (tmp_path / "apptainer.args").read_text().splitlines() == [
        "exec", "--nv", "--bind", binds, "--pwd", str(work), f"/images/{hostile}.sif", "env",
        "HPC_TRAIN_CONTAINER=apptainer", f"HPC_TRAIN_CONTAINER_SITE={site}", f"HPC_TRAIN_CONTAINER_BIN={scripts}",
        f"PYTHONPATH={run_dir.resolve()}/.hpc-train-python", "python3", "-u", "-m", "hpc_train", "train", "--config",
        f"runs/{spec.name}-7/config.yaml", "--output-dir", f"runs/{spec.name}-7"]
    [srun] = fake.calls("srun")
    assert srun.args[:5] == ["--kill-on-bad-exit=1", "--open-mode=append",
                             f"--output=runs/{spec.name}-7/logs/rank-%t.out",
                             f"--task-epilog={run_dir.resolve()}/task-epilog.sh", "apptainer"]  # (its own TMPDIR)
    # An --sbatch value is one word, the value itself, to a shell reading the #SBATCH line's quoting.
    for option in ("comment", "mail-user"):
        [line] = [line for line in script.read_text().splitlines() if line.startswith(f"#SBATCH --{option}=")]
        word = subprocess.run(["bash", "-c", f"printf %s {line.partition('=')[2]}"], cwd=work, capture_output=True,
                              text=True, timeout=10)
        assert word.stdout == hostile and not list(tmp_path.rglob("PWNED")), word.stderr


@pytest.mark.parametrize("script, spec", [
    ("mnist_2node.sh", JobSpec(nodes=2, name="mnist-2node", cpus_per_task=2, time="00:30:00")),
    ("mnist_ps.sh", JobSpec(nodes=2, cpu_tasks_per_node=2, strategy="parameter_server", name="mnist-ps",
                            cpus_per_task=1, time="00:30:00")),
    ("mnist_1node_mirrored.sh", JobSpec(nodes=1, name="mnist-mirrored", cpus_per_task=2, time="00:30:00")),
])
def test_the_hand_written_scripts_ask_what_render_would(script: str, spec: JobSpec) -> None:
    from hpc_train.spec.directives import directives

    text = (Path(__file__).resolve().parents[2] / "slurm" / script).read_text()
    active = dict(line.removeprefix("#SBATCH --").partition("=")[::2] for line in text.splitlines()
                  if line.startswith("#SBATCH --"))
    assert active == {name: "" if value is True else str(value) for name, value in directives(spec).items()}


def run_until_ready(command: list[str], cwd: Path, env: dict[str, str], ready: Path) -> subprocess.Popen[str]:
    job = subprocess.Popen(command, cwd=cwd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline and job.poll() is None:
        time.sleep(0.05)
    assert ready.exists(), job.communicate()[1]
    return job


@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGUSR2])
def test_a_warning_sent_to_the_batch_shell_reaches_the_step(signum: int, tmp_path: Path) -> None:
    """`sbatch --signal=B:USR1@...` or `scancel --batch --signal=USR1` signal the batch shell alone."""
    record, ready = tmp_path / "signals", tmp_path / "ready"
    waiting_srun(tmp_path / "bin", record, ready)
    fake_hpc_train(tmp_path / "bin", "")  # the job body, as an activated environment would have it on PATH
    script = tmp_path / "job.sbatch"
    script.write_text(render_script(JobSpec(nodes=2), TrainConfig(), home=str(tmp_path)))
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "SLURM_JOB_ID": "7",
           "SLURM_JOB_NAME": "job", "SLURM_JOB_NODELIST": "n[1-2]"}
    job = run_until_ready(["bash", str(script)], tmp_path, env, ready)
    job.send_signal(signum)
    job.communicate(timeout=30)
    assert job.returncode == 75  # the step's own exit code
    assert record.read_text().split()[0] == signal.Signals(signum).name[3:]


def test_the_hand_written_scripts_pass_the_warning_on_too(tmp_path: Path) -> None:
    record, ready = tmp_path / "signals", tmp_path / "ready"
    waiting_srun(tmp_path / "bin", record, ready)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "SLURM_JOB_ID": "7",
           "SLURM_JOB_NAME": "mnist-ps", "SLURM_JOB_NODELIST": "n[1-2]", "HPC_TRAIN_HOME": str(root)}
    job = run_until_ready(["bash", str(root / "slurm" / "mnist_ps.sh")], tmp_path, env, ready)
    job.send_signal(signal.SIGUSR1)
    job.communicate(timeout=30)
    assert job.returncode == 75
    args = record.read_text().split()
    assert args[:3] == ["USR1", "--label", "--kill-on-bad-exit=0"]  # parameter server: a lost worker is survived


@pytest.mark.parametrize("hostile", HOSTILE[:3])
def test_each_element_of_a_rendered_sweep_runs_its_own_values_in_its_own_folder(hostile: str, tmp_path: Path) -> None:
    from hpc_train.spec.sweep import grid, grid_axes

    mock_srun(tmp_path / "bin")
    fake_hpc_train(tmp_path / "bin",  # the supervised command's words, and the element's variables
                   'printf "%s\\n" "$@" > "$TRAIN_ARGS"\nenv | grep ^HPC_TRAIN_ | sort > "$TRAIN_ARGS.env"\n')
    sweep = grid(grid_axes(["learning_rate=0.01,0.001", "seed=1,2"]))
    command = ["python", f"{hostile}.py", "--lr={learning_rate}", "--seed", "{seed}"]
    script = tmp_path / "sweep.sbatch"
    script.write_text(render_script(JobSpec(nodes=2, name="sw"), TrainConfig(data_dir=hostile), str(tmp_path),
                                    command=command, sweep=sweep, max_parallel=2))
    text = script.read_text()
    assert "#SBATCH --array=0-3%2\n" in text and "#SBATCH --output=slurm-%x-%A_%a.out\n" in text
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "SLURM_JOB_ID": "12",
           "SLURM_ARRAY_JOB_ID": "10", "SLURM_ARRAY_TASK_ID": "2", "SLURM_JOB_NAME": "sw",
           "SLURM_JOB_NODELIST": "n[1-2]", "TRAIN_ARGS": str(tmp_path / "train.args")}
    result = subprocess.run(["bash", str(script)], cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert not list(tmp_path.rglob("PWNED"))
    run_dir = work / "runs" / "sw-10_2"  # element 2: learning_rate 0.001, seed 1
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert (config["learning_rate"], config["seed"], config["data_dir"]) == (0.001, 1, hostile)
    words = (tmp_path / "train.args").read_text().splitlines()
    assert words[words.index("--") + 1:] == ["python", f"{hostile}.py", "--lr=0.001", "--seed", "1"]
    assert (tmp_path / "train.args.env").read_text().count("HPC_TRAIN_SWEEP_") == 2
    assert "HPC_TRAIN_SWEEP_LEARNING_RATE=0.001\n" in (tmp_path / "train.args.env").read_text()
    assert "HPC_TRAIN_TRIAL=2\n" in (tmp_path / "train.args.env").read_text()
    outside = subprocess.run(["bash", str(script)], cwd=work, env={**env, "SLURM_ARRAY_TASK_ID": "4"},
                             capture_output=True, text=True, timeout=60)
    assert outside.returncode == 2 and "not an element of this sweep (0-3)" in outside.stderr


def test_a_job_of_two_groups_gets_a_block_of_directives_each() -> None:
    """A heterogeneous job (a later issue): the job's own options in the first block, `#SBATCH hetjob` between."""
    from hpc_train.spec.request import Group, JobRequest

    request = JobRequest((Group(nodes=1, cpu_tasks_per_node=2, partition="cpu", roles=("chief", "ps")),
                          Group(nodes=2, gpus_per_node=4, partition="gpu", roles=("worker",))),
                         strategy="parameter_server", name="het", time="1:00:00")
    text = render_script(request, TrainConfig(), HOME)
    header = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    split = header.index("#SBATCH hetjob")
    assert "#SBATCH --partition=cpu" in header[:split] and "#SBATCH --time=1:00:00" in header[:split]
    assert header[split + 1:] == ["#SBATCH --gpus-per-node=4", "#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=4",
                                  "#SBATCH --partition=gpu"]
    assert "1 node(s) x 2 task(s), 0 GPU(s) per node + 2 node(s) x 4 task(s), 4 GPU(s) per node, parameter_server" \
        in text


def test_a_rendered_script_run_with_bash_without_slurm_binds_the_gpus_as_slurm_would(tmp_path: Path) -> None:
    """(issue 46, 5) `bash job.sbatch` without Slurm ran its ranks on the mock launcher with no GPU bound."""
    from tests.fake_nvidia import install_nvidia_smi
    from tests.fake_slurm import without_slurm

    spec = JobSpec(nodes=1, gpus_per_node=2, name="gpus")  # (a task per GPU)
    script = tmp_path / "job.sbatch"
    script.write_text(render_script(spec, TrainConfig(), sys.prefix, program=f"{sys.executable} -m hpc_train",
                                    command=[sys.executable, "-c", "import os; print('GPUS', "
                                             "os.environ.get('CUDA_VISIBLE_DEVICES'))"]))
    work = tmp_path / "work"
    work.mkdir()
    env = {**without_slurm(), "PATH": install_nvidia_smi(tmp_path / "nv", 2)}
    result = subprocess.run(["bash", str(script)], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    [run_dir] = (work / "runs").iterdir()
    assert run_dir.name.startswith("gpus-local-")  # (named as a job run here is: no Slurm job name or id)
    said = sorted(line.split("GPUS ")[1] for line in result.stdout.splitlines() if "GPUS " in line)
    assert said == ["0", "1"], result.stdout  # a GPU each, as srun --gpus-per-node 2 with 2 tasks binds them


# A packed sweep's script (render --pack): one job, no array, its plan written for `hpc-train pack`.

PACK_GOLDEN = GOLDEN / "packed_sweep.sbatch"


def packed(**group: object) -> object:
    return JobSpec(nodes=2, gpus_per_node=4, name="packed", pack=Pack(**group))


def render_pack(spec: JobSpec, train: TrainConfig, home: str, sweep: Sweep, **given: object) -> str:
    """A packed sweep's script: the one writer's, for a request with a pack and a sweep."""
    return render_script(spec, train, home, sweep=sweep, **given)


def test_the_packed_script_matches_its_golden_file() -> None:
    """Regenerate after an intended change with: UPDATE_GOLDEN=1 pytest tests/login/test_script.py"""
    rendered = render_pack(packed(trial_gpus=2), TrainConfig(), "/opt/hpc-train",
                           grid({"learning_rate": [0.1, 0.01], "seed": [1, 2]}),
                           command=["python", "t.py", "--lr={learning_rate}"], max_parallel=3)
    if os.environ.get("UPDATE_GOLDEN"):
        PACK_GOLDEN.write_text(rendered)
    assert rendered == PACK_GOLDEN.read_text()
    assert "--array" not in rendered and "#SBATCH --ntasks-per-node=4\n" in rendered
    assert rendered.rstrip().endswith('exec hpc-train pack --run-dir "$run_dir"')
    plan = json.loads(re.search(r"<<'HPC_TRAIN_PACK'\n(.*)\nHPC_TRAIN_PACK", rendered, re.S).group(1))
    assert plan["trials"] == [{"learning_rate": 0.1, "seed": 1}, {"learning_rate": 0.1, "seed": 2},
                              {"learning_rate": 0.01, "seed": 1}, {"learning_rate": 0.01, "seed": 2}]
    assert plan["share"] == {"nodes": 1, "gpus": 2, "tasks": 2, "cpus": None, "per_node": 2}
    assert plan["max_parallel"] == 3 and plan["command"] == ["python", "t.py", "--lr={learning_rate}"]


def test_a_packs_trials_run_in_its_image() -> None:
    rendered = render_pack(JobSpec(nodes=2, gpus_per_node=4, name="packed", pack=Pack(), container="/images/tf.sif"),
                           TrainConfig(), "/opt/hpc-train", grid({"seed": [1, 2]}))
    plan = json.loads(re.search(r"<<'HPC_TRAIN_PACK'\n(.*)\nHPC_TRAIN_PACK", rendered, re.S).group(1))
    assert plan["container"] == {"image": "/images/tf.sif", "runtime": "apptainer"}  # the image says its runtime


PACK_HOSTILE = ["x'; touch PWNED #", "$(touch PWNED)", "`touch PWNED`", "HPC_TRAIN_PACK", 'a "quoted"\nHPC_TRAIN_PACK']


def test_hostile_values_reach_the_packs_plan_intact_through_a_real_shell(tmp_path: Path) -> None:
    import subprocess

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "hpc-train"  # the job body: here, it keeps the plan the script wrote
    fake.write_text('#!/bin/bash\ncp "$3/pack.json" "$PWD/kept.json"\n')
    fake.chmod(0o755)
    script = tmp_path / "pack.sbatch"
    script.write_text(render_pack(packed(), TrainConfig(), str(tmp_path / "no-home"), grid({"seed": [1, 2]}),
                                  runs_dir=str(tmp_path / "runs"), command=["echo", *PACK_HOSTILE, "{seed}"]))
    result = subprocess.run(["bash", str(script)], cwd=tmp_path, capture_output=True, text=True,
                            env={"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_NAME": "packed", "SLURM_JOB_ID": "5"})
    assert result.returncode == 0, result.stderr
    assert not list(tmp_path.rglob("PWNED"))
    plan = json.loads((tmp_path / "kept.json").read_text())
    assert plan["command"] == ["echo", *PACK_HOSTILE, "{seed}"]
    assert (tmp_path / "runs" / "packed-5" / "config.yaml").is_file()


def test_submit_dry_run_shows_the_packed_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.cli.running import run_main

    code, out, err = run_main(["submit", "--nodes", "2", "--gpus-per-node", "2", "--pack", "--sweep", "seed=1,2,3",
                               "--dry-run", "--no-snapshot", "--output-dir", str(tmp_path)], capsys)
    assert code == 0, err
    assert "a packed sweep of 3 trials in one job of 2 node(s), 3 at once (1 GPU(s) each)" in out
    assert 'pack --run-dir "$run_dir"' in out and "--array" not in out
    assert not list(tmp_path.iterdir())  # nothing queued, nothing written
