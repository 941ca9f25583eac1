"""`--sweep`, `--max-parallel` and `--prune` on render and submit, and a YAML sweep: each bad sweep refused in one
line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.running import run_main


@pytest.mark.parametrize("args, said", [
    (["--sweep", "lerning_rate=0.1"], "unknown key 'lerning_rate' in --sweep lerning_rate"),
    (["--sweep", "epochs=1,0"], "sweep element 1 (epochs=0): epochs: must be 1 or more"),
    (["--sweep", "strategy=multiworker"], "--sweep strategy: the strategy is the job's"),
    (["--sweep", "seed=1", "--max-parallel", "0"], "--max-parallel 0: must be 1 or more"),
    (["--max-parallel", "2"], "--max-parallel applies to a sweep"),
    (["--prune", "halving"], "--prune applies to a sweep"),
    (["--sweep", "seed=1,2", "--", "python", "t.py", "--lr={learning_rate}"], "uses {learning_rate}, which no --sweep"),
])
def test_a_bad_sweep_is_one_line_and_nothing_is_written(args: list[str], said: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "sweep.sbatch"
    code, _, err = run_main(["render", "--nodes", "2", "-o", str(output), *args], capsys)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err
    assert not output.exists()


def test_a_yaml_sweep_renders_one_array_and_shows_its_elements(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "job.yaml"
    config.write_text("epochs: 2\nsweep:\n  random: {trials: 3, seed: 1, space: {learning_rate: 'loguniform(1e-4, 1e-2)'}}\n")
    output = tmp_path / "sweep.sbatch"
    code, _, err = run_main(["render", "--nodes", "1", "--config", str(config), "-o", str(output)], capsys)
    assert code == 0, err
    assert "a sweep of 3 elements" in err and "INDEX  learning_rate" in err
    assert "#SBATCH --array=0-2\n" in output.read_text() and output.read_text().count("epochs: 2\n") == 3
    code, _, err = run_main(["train", "--config", str(config)], capsys)
    assert code == 2 and "a sweep runs as a job array" in err
    code, out, err = run_main(["submit", "--nodes", "1", "--config", str(config), "--dry-run"], capsys)
    assert code == 0 and "a sweep of 3 elements" in out and "#SBATCH --array=0-2\n" in out, err
    assert "a sweep of 3 elements drawn at random (seed 1: the same seed draws them again)" in out


def test_a_yaml_random_sweep_without_a_seed_draws_one_at_submit_and_shows_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """(issue 46, 5) `sweep: random:` without a seed drew with seed 0: every submission the same trials."""
    import re

    config = tmp_path / "job.yaml"
    config.write_text("sweep:\n  random: {trials: 4, space: {learning_rate: 'loguniform(1e-4, 1e-2)'}}\n")
    shown = []
    for _ in range(2):
        code, out, err = run_main(["submit", "--nodes", "1", "--config", str(config), "--dry-run"], capsys)
        assert code == 0, err
        seed = re.search(r"drawn at random \(seed (\d+):", out)
        assert seed, out
        shown.append((seed.group(1), out.split("#!")[0]))
    assert shown[0][0] != shown[1][0] and shown[0][1] != shown[1][1]  # other seeds, other elements
    again = tmp_path / "again.yaml"
    again.write_text(f"sweep:\n  random: {{trials: 4, seed: {shown[0][0]}, space: {{learning_rate: "
                     "'loguniform(1e-4, 1e-2)'}}\n")
    code, out, _ = run_main(["submit", "--nodes", "1", "--config", str(again), "--dry-run"], capsys)
    assert out.split("#!")[0] == shown[0][1]  # the seed shown draws them again


def test_a_commands_sweep_takes_keys_of_its_own_typed_from_their_values(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 46: `--sweep nap=5,75 -- python3 job.py {nap}` packed, and a TPE search of a command's own dropout:
    each key exported as HPC_TRAIN_SWEEP_<KEY>, `{KEY}` replaced, and kept out of config.yaml."""
    monkeypatch.chdir(tmp_path)  # (the dry run stores its code snapshot in runs/)
    code, out, err = run_main(["submit", "--nodes", "2", "--gpus-per-node", "2", "--pack", "--dry-run",
                               "--sweep", "nap=5,75", "--", "python3", "job.py", "{nap}"], capsys)
    assert code == 0, err
    assert "INDEX  nap" in out and '"nap": 5\n' in out and '"nap": 75\n' in out and '"{nap}"' in out, out
    assert "nap:" not in out.split("HPC_TRAIN_CONFIG")[1], out  # not a setting: out of config.yaml
    output = tmp_path / "search.sbatch"
    code, _, err = run_main(["render", "--nodes", "1", "-o", str(output), "--sweep", "dropout=0.1:0.5", "--search",
                             "tpe", "--trials", "4", "--", "python", "train.py", "--dropout", "{dropout}"], capsys)
    assert code == 0, err
    script = output.read_text()
    assert '"dropout": {"low": 0.1, "high": 0.5, "log": false, "int": false}' in script, script
    assert "{dropout}" in script and "dropout:" not in script.split("HPC_TRAIN_CONFIG")[1], script
    grid = tmp_path / "grid.sbatch"
    code, _, err = run_main(["render", "--nodes", "1", "-o", str(grid), "--sweep", "nap=5,75", "--sweep",
                             "mode=fast,slow", "--", "python3", "job.py"], capsys)  # read from the environment alone
    assert code == 0, err
    assert "export HPC_TRAIN_SWEEP_NAP=75 HPC_TRAIN_SWEEP_MODE=slow" in grid.read_text()
    assert "nap:" not in grid.read_text() and "mode:" not in grid.read_text()


@pytest.mark.parametrize("args, said", [
    (["--sweep", "nap=5,75"], "unknown key 'nap' in --sweep nap; valid keys: strategy, task, model,"),
    (["--sweep", "nap=5:75", "--search", "tpe", "--trials", "2"], "unknown key 'nap' in --sweep nap; valid keys:"),
    (["--sweep", "nap=5,75", "--", "python3", "job.py", "{nap}", "{naps}"], "uses {naps}, which no --sweep defines"),
    (["--sweep", "na-p=5,75", "--", "python3", "job.py"], "'na-p' is not a name a command's sweep can export"),
    (["--sweep", "learning_rate=fast", "--", "python3", "job.py"], "learning_rate: expected a number"),
])
def test_a_trainers_sweep_keeps_to_its_settings_and_a_commands_keys_are_names(
        args: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "sweep.sbatch"
    code, _, err = run_main(["render", "--nodes", "1", "-o", str(output), *args], capsys)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err
    assert not output.exists()
