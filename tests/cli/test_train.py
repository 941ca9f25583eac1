"""`hpc-train train` and `hpc-train data`: settings and one-line errors (no training here)."""

from __future__ import annotations

import pytest

from tests.cli.running import run_main


def test_keys_lists_every_setting_with_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["train", "--keys"], capsys)
    assert code == 0
    assert "batch_size: 64" in out.splitlines() and "data_dir: null" in out.splitlines()


@pytest.mark.parametrize("args, message", [
    (["--set", "batch_size=-1"], "batch_size: must be 1 or more, got -1"),
    (["--set", "strategy=allreduce"], "strategy: expected one of none, mirrored, multiworker, parameter_server"),
    (["--data-dir", "/no/such/dir"], "--data-dir '/no/such/dir' is not a directory; stage it on a machine with "
                                     "internet (a login node) with `hpc-train data fetch --dest DIR`"),
    (["--config", "/no/such.yaml"], "cannot read config '/no/such.yaml'"),
    (["--set", "strategy=multiworker"], "strategy multiworker needs a cluster: run it under srun"),
])
def test_bad_settings_fail_with_one_line_and_exit_2(args: list[str], message: str, clean_environ: None,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["train", *args], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("hpc-train train: error: ")
    assert message in err


def test_fetch_without_internet_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    code, _, err = run_main(["data", "fetch", "--dest", str(tmp_path), "--url", "http://127.0.0.1:9/mnist.npz"],
                            capsys)
    assert code == 2
    assert err.startswith("hpc-train data: error: cannot download http://127.0.0.1:9/mnist.npz")
    assert err.count("\n") == 1


def test_hpc_train_data_dir_is_the_default_data_directory_and_an_explicit_one_wins(
        clean_environ: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """(issue 27, 6) HPC_TRAIN_DATA_DIR: one meaning everywhere (train here; render, submit and --local below)."""
    monkeypatch.setenv("HPC_TRAIN_DATA_DIR", "/no/such/env-dir")
    code, _, err = run_main(["train"], capsys)
    assert code == 2 and "'/no/such/env-dir' is not a directory" in err
    code, _, err = run_main(["train", "--data-dir", "/no/such/dir"], capsys)
    assert code == 2 and "'/no/such/dir' is not a directory" in err


@pytest.mark.parametrize("verb", [["render", "--nodes", "2"], ["submit", "--nodes", "2", "--dry-run"]])
def test_render_and_submit_take_hpc_train_data_dir_unless_told_otherwise(verb: list[str], tmp_path) -> None:
    import subprocess
    import sys

    from tests.fake_slurm import without_slurm

    def script(*args: str, data_dir: str | None = "/data/from env") -> str:
        env = {name: value for name, value in without_slurm().items() if name != "HPC_TRAIN_DATA_DIR"}
        env |= {"HPC_TRAIN_DATA_DIR": data_dir} if data_dir else {}
        result = subprocess.run([sys.executable, "-m", "hpc_train", *verb, *args], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        return result.stdout

    assert "data_dir: /data/from env\n" in script()
    assert "data_dir: /mine\n" in script("--set", "data_dir=/mine")
    (tmp_path / "job.yaml").write_text("data_dir: /from/the/file\n")
    assert "data_dir: /from/the/file\n" in script("--config", "job.yaml")
    assert "data_dir: null\n" in script(data_dir=None)


def test_keys_says_what_each_key_does_above_it_as_a_config_file_would(capsys: pytest.CaptureFixture[str]) -> None:
    """(issue 27, 11) --keys listed the keys without a word on what they do."""
    import yaml

    from hpc_train.config import TrainConfig

    code, out, _ = run_main(["train", "--keys"], capsys)
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2 * len(TrainConfig.valid_keys())
    for comment, setting in zip(lines[::2], lines[1::2]):
        assert comment.startswith("# ") and comment != f"# {setting.split(':')[0]}" and len(comment) > 30, comment
    assert "# Images per replica per step; the global batch is this times the replicas." in lines
    assert yaml.safe_load(out)["batch_size"] == 64  # it is a config file as it is


def test_train_help_points_at_what_an_installed_hpc_train_has(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["train", "--help"], capsys)
    assert code == 0 and "templates/" not in out and "hpc-train init myproject" in out
