"""env/install.py: what pip's configuration says about where packages come from reaches uv, in its environment (an
index's URL may hold a password: never on a command line), or pip installs."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.quick
SCRIPT = Path(__file__).resolve().parents[1] / "env" / "install.py"


def install() -> ModuleType:
    spec = importlib.util.spec_from_file_location("env_install", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def settings_read_by_pip(config: str, tmp_path: Path, **variables: str) -> dict[str, str]:
    """pip_settings() as the script reads them, from this pip.conf and these PIP_* variables alone."""
    path = tmp_path / "pip.conf"
    path.write_text(config)
    environment = {name: value for name, value in os.environ.items() if not name.startswith("PIP_")}
    environment |= {"PIP_CONFIG_FILE": str(path), **variables}
    read = subprocess.run([sys.executable, "-c", f"import json, runpy; m = runpy.run_path({str(SCRIPT)!r}); "
                           "print(json.dumps(m['pip_settings']()))"], env=environment, capture_output=True, text=True,
                          check=True)
    return json.loads(read.stdout)


def test_pips_indexes_links_constraints_and_certificate_become_uvs_environment(tmp_path: Path) -> None:
    settings = settings_read_by_pip(
        "[global]\nindex-url = https://user:secret@mirror.example/simple\nextra-index-url =\n    file:///a/simple\n"
        "    https://b.example/simple\nfind-links = /opt/wheels /more\nconstraint = /etc/c.txt\ncert = /etc/ca.crt\n"
        "default-timeout = 180\n", tmp_path)
    assert install().uv_environment(settings) == {
        "UV_INDEX_STRATEGY": "unsafe-best-match", "UV_DEFAULT_INDEX": "https://user:secret@mirror.example/simple",
        "UV_INDEX": "file:///a/simple https://b.example/simple", "UV_FIND_LINKS": "/opt/wheels,/more",
        "UV_CONSTRAINT": "/etc/c.txt", "SSL_CERT_FILE": "/etc/ca.crt"}


def test_install_then_global_then_the_environment_win_and_other_commands_sections_count_for_nothing(
        tmp_path: Path) -> None:
    settings = settings_read_by_pip(
        "[global]\nindex-url = https://file.example/simple\nfind-links = /from/global\n"
        "[install]\nfind-links = /from/install\n[wheel]\nfind-links = /from/wheel\nconstraint = /wheel.txt\n",
        tmp_path, PIP_INDEX_URL="https://env.example/simple")
    assert settings["index-url"] == "https://env.example/simple"
    assert settings["find-links"] == "/from/install" and settings.get("constraint") != "/wheel.txt"
    assert install().uv_environment(settings) is not None  # (PIP_CONFIG_FILE itself changes nothing installed)


@pytest.mark.parametrize("setting", ["trusted-host", "proxy", "client-cert", "only-binary"])
def test_a_setting_uv_would_not_honour_leaves_the_install_to_pip(setting: str, monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    module = install()
    assert module.uv_environment({setting: "x"}) is None
    ran: list[list[str]] = []
    monkeypatch.setattr(module, "pip_settings", lambda: {setting: "x"})
    monkeypatch.setattr(module, "subprocess", FakeSubprocess(ran, uv_exit=0))
    assert module.main(["/project", "test"]) == 0
    assert all("uv" not in command for command in ran) and ran[-1][-2:] == ["--editable", "/project[test]"]


def test_a_uv_that_fails_leaves_the_install_to_pip_and_says_so(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    module = install()
    ran: list[list[str]] = []
    monkeypatch.setattr(module, "pip_settings", lambda: {"index-url": "https://user:secret@mirror.example/simple"})
    monkeypatch.setattr(module, "subprocess", FakeSubprocess(ran, uv_exit=2))
    assert module.main(["/project", "test"]) == 0
    assert len([command for command in ran if command[1:3] == ["-m", "uv"]]) == 1  # (the indexes: no cache first)
    assert not any("secret" in part for command in ran for part in command)  # the URL went by the environment
    assert ran[-1][-2:] == ["--editable", "/project[test]"] and "uv could not install it" in capsys.readouterr().err


@pytest.mark.parametrize("offline_exit", [0, 2])
def test_asked_uv_installs_from_its_cache_alone_and_asks_the_indexes_only_for_what_the_cache_lacks(
        offline_exit: int, monkeypatch: pytest.MonkeyPatch) -> None:
    module = install()
    ran: list[list[str]] = []
    quiet: list[bool] = []
    monkeypatch.setenv("HPC_TRAIN_UV_CACHE_FIRST", "1")
    monkeypatch.setattr(module, "pip_settings", lambda: {"index-url": "https://user:secret@mirror.example/simple"})
    monkeypatch.setattr(module, "subprocess", FakeSubprocess(ran, uv_exit=0, offline_exit=offline_exit, quiet=quiet))
    assert module.main(["/project", "test"]) == 0
    uv_runs = [command for command in ran if command[1:3] == ["-m", "uv"]]
    assert [command[-1] for command in uv_runs] == ["--offline"] + (["/project[test]"] if offline_exit else [])
    assert quiet == [True, False][:len(uv_runs)]  # the cache's miss not shown; the indexes' errors are
    assert all(command[1:3] != ["-m", "pip"] or command[-1] == "uv" for command in ran)  # no pip install after


def test_asked_uv_that_fails_from_its_cache_and_from_the_indexes_leaves_the_install_to_pip(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    module = install()
    ran: list[list[str]] = []
    monkeypatch.setenv("HPC_TRAIN_UV_CACHE_FIRST", "1")
    monkeypatch.setattr(module, "pip_settings", lambda: {"index-url": "https://user:secret@mirror.example/simple"})
    monkeypatch.setattr(module, "subprocess", FakeSubprocess(ran, uv_exit=2))
    assert module.main(["/project", "test"]) == 0
    assert [command[-1] for command in ran if command[1:3] == ["-m", "uv"]] == ["--offline", "/project[test]"]
    assert ran[-1][-2:] == ["--editable", "/project[test]"] and "uv could not install it" in capsys.readouterr().err


class FakeSubprocess:
    """subprocess as env/install.py uses it: records each command (and in `quiet`, whether each of uv's had its
    output captured); uv exits `offline_exit` from its cache alone, `uv_exit` otherwise, everything else 0."""

    CalledProcessError = subprocess.CalledProcessError

    def __init__(self, ran: list[list[str]], uv_exit: int, offline_exit: int | None = None,
                 quiet: list[bool] | None = None) -> None:
        self.ran, self.uv_exit, self.quiet = ran, uv_exit, [] if quiet is None else quiet
        self.offline_exit = uv_exit if offline_exit is None else offline_exit

    def run(self, command: list[str], **options: Any) -> subprocess.CompletedProcess[str]:
        self.ran.append(command)
        is_uv = command[1:3] == ["-m", "uv"]
        if not is_uv:
            return subprocess.CompletedProcess(command, 0, "", "")
        assert options["env"]["UV_DEFAULT_INDEX"].endswith("mirror.example/simple")
        self.quiet.append(bool(options.get("capture_output")))
        return subprocess.CompletedProcess(command, self.offline_exit if "--offline" in command else self.uv_exit,
                                           "", "")
