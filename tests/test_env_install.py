"""env/install.py: what pip's configuration says about where packages come from reaches uv, or pip installs."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.quick
SCRIPT = Path(__file__).resolve().parents[1] / "env" / "install.py"


def install() -> ModuleType:
    spec = importlib.util.spec_from_file_location("env_install", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pips_indexes_links_constraints_and_certificate_become_uvs_flags_and_environment() -> None:
    flags, environment = install().uv_arguments({
        "index-url": "https://mirror.example/simple", "extra-index-url": "file:///a/simple https://b.example/simple",
        "find-links": "/opt/wheels", "constraint": "/etc/c.txt", "cert": "/etc/ca.crt", "default-timeout": "180"})
    assert flags == ["--index-strategy", "unsafe-best-match", "--default-index", "https://mirror.example/simple",
                     "--index", "file:///a/simple", "--index", "https://b.example/simple", "--find-links",
                     "/opt/wheels", "--constraint", "/etc/c.txt"]
    assert environment == {"SSL_CERT_FILE": "/etc/ca.crt"}


@pytest.mark.parametrize("setting", ["trusted-host", "proxy", "client-cert", "only-binary"])
def test_a_setting_uv_would_not_honour_leaves_the_install_to_pip(setting: str, monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    module = install()
    assert module.uv_arguments({setting: "x"}) is None
    ran: list[list[str]] = []
    monkeypatch.setattr(module, "pip_settings", lambda: {setting: "x"})
    monkeypatch.setattr(module.subprocess, "run", lambda command, **_: ran.append(command))
    assert module.install_with_uv("/project[test]") is False and not ran  # nothing tried with uv


def test_pips_own_configuration_is_read_the_environment_winning(tmp_path: Path) -> None:
    config = tmp_path / "pip.conf"
    config.write_text("[global]\nindex-url = https://file.example/simple\nfind-links = /from/file\n"
                      "[install]\nfind-links = /from/install\n")
    environment = {name: value for name, value in os.environ.items() if not name.startswith("PIP_")}
    environment |= {"PIP_CONFIG_FILE": str(config), "PIP_INDEX_URL": "https://env.example/simple"}
    read = subprocess.run([sys.executable, "-c", f"import json, runpy; m = runpy.run_path({str(SCRIPT)!r}); "
                           "print(json.dumps(m['pip_settings']()))"], env=environment, capture_output=True, text=True,
                          check=True)
    settings = json.loads(read.stdout)
    assert settings["index-url"] == "https://env.example/simple"
    assert settings["find-links"] == "/from/install"
