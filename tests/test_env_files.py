"""The files in env/ that a site uses: the Apptainer definition and the module example."""

from __future__ import annotations

from pathlib import Path

ENV = Path(__file__).resolve().parents[1] / "env"


def test_the_apptainer_image_installs_hpc_train_and_tensorflow_from_this_checkout() -> None:
    definition = (ENV / "hpc-train.def").read_text()
    sections = {line.split()[0] for line in definition.splitlines() if line.startswith("%")}
    assert {"%files", "%post", "%environment", "%runscript"} <= sections
    assert "pip install --no-cache-dir /opt/hpc-train" in definition
    assert "tensorflow[and-cuda]" in definition
    for source in ("pyproject.toml", "hpc_train", "templates"):  # everything pip needs from the checkout
        assert f"    {source} /opt/hpc-train/{source}" in definition
        assert (ENV.parent / source).exists()


def test_site_modules_go_in_site_sh_which_activate_sources() -> None:
    assert "module load" in (ENV / "site.example.sh").read_text()
    assert 'source "$_hpc_train_root/env/site.sh"' in (ENV / "activate.sh").read_text()
