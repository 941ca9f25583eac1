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
