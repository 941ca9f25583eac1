"""`--pack` and its trial share on render and submit: what cannot be packed refused in one line, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.running import run_main


@pytest.mark.parametrize("args, said", [
    (["--gpus-per-node", "2", "--pack", "--trial-gpus", "4", "--sweep", "seed=1,2"],
     "--trial-gpus 4: a trial share larger than a node (2 GPU(s))"),
    (["--gpus-per-node", "4", "--pack", "--trial-gpus", "3", "--sweep", "seed=1,2"],
     "--trial-gpus 3 does not divide a node's 4 GPUs"),
    (["--gpus-per-node", "2", "--pack", "--trial-nodes", "3", "--sweep", "seed=1,2"],
     "--trial-nodes 3: a trial share larger than the job's 2 node(s)"),
    (["--gpus-per-node", "2", "--pack"], "--pack applies to a sweep: add --sweep"),
    (["--gpus-per-node", "2", "--pack", "--strategy", "parameter_server", "--ps-partition", "cpu", "--sweep",
      "seed=1,2"], "--pack with --ps-partition"),
    (["--gpus-per-node", "2", "--trial-gpus", "1", "--sweep", "seed=1,2"], "--trial-gpus applies to a packed sweep"),
    (["--pack", "--trial-gpus", "1", "--sweep", "seed=1,2"], "--trial-gpus 1 with no GPUs per node"),
    (["--gpus-per-node", "2", "--pack", "--trial-cpus", "2", "--sweep", "seed=1,2"],
     "--trial-cpus applies on CPU-only nodes"),
    (["--gpus-per-node", "2", "--pack", "--trial-gpus", "1", "--trial-nodes", "1", "--sweep", "seed=1,2"],
     "--trial-gpus with --trial-nodes"),
    (["--gpus-per-node", "2", "--pack", "--trial-gpus", "0", "--sweep", "seed=1,2"],
     "--trial-gpus 0: must be a whole number of 1 or more"),
])
def test_what_cannot_be_packed_is_one_line(args: list[str], said: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "pack.sbatch"
    code, _, err = run_main(["render", "--nodes", "2", "-o", str(output), *args], capsys)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err
    assert not output.exists()


def test_submit_refuses_pack_with_local(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["submit", "--nodes", "1", "--local", "--pack", "--sweep", "seed=1,2",
                             "--output-dir", str(tmp_path)], capsys)
    assert code == 2 and "--pack with --local" in err and len(err.strip().splitlines()) == 1, err


def test_the_yaml_job_section_packs_and_says_the_share(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "job.yaml"
    config.write_text("epochs: 1\njob:\n  pack: {trial_gpus: 2}\nsweep:\n  grid: {seed: [1, 2, 3]}\n")
    output = tmp_path / "pack.sbatch"
    code, _, err = run_main(["render", "--nodes", "2", "--gpus-per-node", "4", "--config", str(config),
                             "-o", str(output)], capsys)
    assert code == 0, err
    script = output.read_text()
    assert "--array" not in script and "#SBATCH --nodes=2\n" in script and "#SBATCH --gpus-per-node=4\n" in script
    assert "a packed sweep of 3 trials in one job of 2 node(s), 3 at once (2 GPU(s) each)" in err
    config.write_text("job:\n  pack: {trial_gpu: 2}\nsweep:\n  grid: {seed: [1, 2]}\n")
    code, _, err = run_main(["render", "--nodes", "2", "--config", str(config), "-o", str(output)], capsys)
    assert code == 2 and "job: pack" in err and "trial_gpus" in err, err
