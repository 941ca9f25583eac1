"""`--container IMAGE [--container-runtime R]` on render, submit (--dry-run, --local, a sweep) and the YAML's job:
section: it reaches the job body's line, and a missing image, an unknown runtime or Pyxis without srun is one line,
exit 2, before anything is stored or queued."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.running import run_main

NGC = "nvcr.io#nvidia/tensorflow:25.02-tf2-py3"


@pytest.mark.parametrize("args, said", [
    (["--container", "/nowhere/tf.sif"], "--container /nowhere/tf.sif: no such image file or folder (apptainer)"),
    (["--container", NGC, "--container-runtime", "docker"],
     "--container-runtime 'docker': expected one of apptainer, pyxis, charliecloud"),
    (["--container-runtime", "pyxis"], "--container-runtime names the runtime of an image: add --container IMAGE"),
    (["--container", "/images/tf.img"], "--container /images/tf.img: which runtime runs it?"),
    (["--container", NGC, "--local"], f"--container {NGC}: Pyxis starts ranks in an image only under srun"),
])
def test_what_cannot_run_in_a_container_is_one_line_before_anything_is_stored(
        args: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    dry = [] if "--local" in args else ["--dry-run"]
    code, _, err = run_main(["submit", "--nodes", "2", *dry, *args, "--", "true"], capsys)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "runs").exists()


def test_render_a_sweep_and_the_yaml_hand_the_image_and_its_runtime_to_the_job_body(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "image").mkdir()
    line = f" --container {tmp_path / 'image'} --container-runtime charliecloud "
    code, rendered, err = run_main(["render", "--nodes", "2", "--container", "image", "--container-runtime",
                                    "charliecloud"], capsys)
    assert code == 0 and line in rendered, err
    code, swept, err = run_main(["render", "--nodes", "2", "--container", NGC, "--sweep", "seed=1,2"], capsys)
    assert code == 0 and f" --container '{NGC}' --container-runtime pyxis " in swept, err
    (tmp_path / "job.yaml").write_text("epochs: 1\njob:\n  container: image\n  container_runtime: charliecloud\n")
    code, from_yaml, err = run_main(["render", "--nodes", "2", "--config", "job.yaml"], capsys)
    assert code == 0 and line in from_yaml, err
    (tmp_path / "bad.yaml").write_text("job:\n  container: 3\n")
    code, _, err = run_main(["render", "--nodes", "2", "--config", "bad.yaml"], capsys)
    assert code == 2 and "job: container 3: the image every rank runs in (--container IMAGE)" in err, err


def test_render_warns_of_an_image_that_is_not_here_and_still_writes_the_script(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """(issue 46, 5) `render --container /missing.sif` was silent where submit refuses it."""
    monkeypatch.chdir(tmp_path)
    code, rendered, err = run_main(["render", "--nodes", "2", "--container", "/missing.sif"], capsys)
    assert code == 0 and " --container /missing.sif --container-runtime apptainer " in rendered
    assert len(err.strip().splitlines()) == 1 and err.startswith(
        "hpc-train render: warning: --container /missing.sif: no such image file or folder (apptainer)")
    assert "submit refuses it here" in err
    code, _, err = run_main(["render", "--nodes", "2", "--container", NGC], capsys)
    assert code == 0 and "warning" not in err  # a registry's image: Pyxis pulls it there
