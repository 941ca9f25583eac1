"""A packed sweep's script (render --pack): one job, no array, its plan written for `hpc-train pack`; its share."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from hpc_train.config import TrainConfig
from hpc_train.spec.pack import Pack, PackError, Share, job_tasks_per_node, share_of, shares_in
from hpc_train.spec.request import JobSpec
from hpc_train.login.packscript import render_pack
from hpc_train.spec.sweep import grid

GOLDEN = Path(__file__).with_name("golden") / "packed_sweep.sbatch"


def packed(**group: object) -> object:
    return JobSpec(nodes=2, gpus_per_node=4, name="packed", pack=Pack(**group))


def test_the_packed_script_matches_its_golden_file() -> None:
    """Regenerate after an intended change with: UPDATE_GOLDEN=1 pytest tests/login/test_packscript.py"""
    rendered = render_pack(packed(trial_gpus=2), TrainConfig(), "/opt/hpc-train",
                           grid({"learning_rate": [0.1, 0.01], "seed": [1, 2]}),
                           command=["python", "t.py", "--lr={learning_rate}"], max_parallel=3)
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(rendered)
    assert rendered == GOLDEN.read_text()
    assert "--array" not in rendered and "#SBATCH --ntasks-per-node=4\n" in rendered
    assert rendered.rstrip().endswith('exec hpc-train pack --run-dir "$run_dir"')
    plan = json.loads(re.search(r"<<'HPC_TRAIN_PACK'\n(.*)\nHPC_TRAIN_PACK", rendered, re.S).group(1))
    assert plan["trials"] == [{"learning_rate": 0.1, "seed": 1}, {"learning_rate": 0.1, "seed": 2},
                              {"learning_rate": 0.01, "seed": 1}, {"learning_rate": 0.01, "seed": 2}]
    assert plan["share"] == {"nodes": 1, "gpus": 2, "tasks": 2, "cpus": None, "per_node": 2}
    assert plan["max_parallel"] == 3 and plan["command"] == ["python", "t.py", "--lr={learning_rate}"]


@pytest.mark.parametrize("pack, group, share", [
    (Pack(), (2, 4, 1, False, None), Share(1, 1, 1, None, 4)),
    (Pack(trial_gpus=2), (2, 4, 1, True, 8), Share(1, 2, 1, 8, 2)),
    (Pack(trial_nodes=2), (4, 2, 1, False, None), Share(2, 2, 2, None, 1)),
    (Pack(trial_cpus=3), (2, 0, 4, False, None), Share(1, 0, 1, 3, 4)),
])
def test_a_share_is_the_trials_part_of_the_nodes(pack: Pack, group: tuple, share: Share) -> None:
    assert share_of(pack, *group) == share
    assert job_tasks_per_node(share) * group[0] >= share.tasks * share.nodes  # Slurm allocates every share's ranks


def test_how_many_trials_run_at_once() -> None:
    assert shares_in(Share(1, 1, 1, None, 4), 2) == 8 and shares_in(Share(2, 2, 2, None, 1), 5) == 2


def test_a_share_larger_than_a_node_is_refused() -> None:
    with pytest.raises(PackError, match="larger than a node"):
        share_of(Pack(trial_gpus=8), 1, 4, 1, False, None)


def test_a_packs_trials_run_in_its_image() -> None:
    rendered = render_pack(JobSpec(nodes=2, gpus_per_node=4, name="packed", pack=Pack(), container="/images/tf.sif"),
                           TrainConfig(), "/opt/hpc-train", grid({"seed": [1, 2]}))
    plan = json.loads(re.search(r"<<'HPC_TRAIN_PACK'\n(.*)\nHPC_TRAIN_PACK", rendered, re.S).group(1))
    assert plan["container"] == {"image": "/images/tf.sif", "runtime": "apptainer"}  # the image says its runtime


HOSTILE = ["x'; touch PWNED #", "$(touch PWNED)", "`touch PWNED`", "HPC_TRAIN_PACK", 'a "quoted"\nHPC_TRAIN_PACK']


def test_hostile_values_reach_the_plan_intact_through_a_real_shell(tmp_path: Path) -> None:
    import subprocess

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "hpc-train"  # the job body: here, it keeps the plan the script wrote
    fake.write_text('#!/bin/bash\ncp "$3/pack.json" "$PWD/kept.json"\n')
    fake.chmod(0o755)
    script = tmp_path / "pack.sbatch"
    script.write_text(render_pack(packed(), TrainConfig(), str(tmp_path / "no-home"), grid({"seed": [1, 2]}),
                                  runs_dir=str(tmp_path / "runs"), command=["echo", *HOSTILE, "{seed}"]))
    result = subprocess.run(["bash", str(script)], cwd=tmp_path, capture_output=True, text=True,
                            env={"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_NAME": "packed", "SLURM_JOB_ID": "5"})
    assert result.returncode == 0, result.stderr
    assert not list(tmp_path.rglob("PWNED"))
    plan = json.loads((tmp_path / "kept.json").read_text())
    assert plan["command"] == ["echo", *HOSTILE, "{seed}"]
    assert (tmp_path / "runs" / "packed-5" / "config.yaml").is_file()


def test_submit_dry_run_shows_the_packed_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.cli.running import run_main

    code, out, err = run_main(["submit", "--nodes", "2", "--gpus-per-node", "2", "--pack", "--sweep", "seed=1,2,3",
                               "--dry-run", "--no-snapshot", "--output-dir", str(tmp_path)], capsys)
    assert code == 0, err
    assert "a packed sweep of 3 trials in one job of 2 node(s), 3 at once (1 GPU(s) each)" in out
    assert 'pack --run-dir "$run_dir"' in out and "--array" not in out
    assert not list(tmp_path.iterdir())  # nothing queued, nothing written
