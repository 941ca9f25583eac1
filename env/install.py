"""Install hpc-train (editable, with the extras asked) and its dependencies into the Python that runs this (the
project's .venv, from env/setup.sh): with uv where it can be had, else with pip.

    .venv/bin/python env/install.py PROJECT EXTRAS

pip downloads and unpacks one wheel after another: 67 s here for TensorFlow and the rest into a new .venv; uv
(Astral's installer, from PyPI) does the same in parallel: 26 s, bytecode compiled (AMD EPYC, 2 cores; docs/
development.md). uv reads none of pip's configuration, so what pip's says about where packages come from (indexes,
find-links, constraints, a certificate) is passed on to uv; a setting it cannot pass on, or a uv that fails for any
reason, and pip installs as before. Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import os
import subprocess
import sys

# pip's settings (`pip config list`, environment first) and uv's flags for them. pip weighs an extra index equal
# to its main one (the best version anywhere): so does uv with unsafe-best-match.
FLAGS = {"index-url": "--default-index", "extra-index-url": "--index", "find-links": "--find-links",
         "constraint": "--constraint"}
# Settings of pip that change nothing of what it installs.
HARMLESS = {"disable-pip-version-check", "default-timeout", "timeout", "no-warn-script-location", "progress-bar",
            "quiet", "verbose", "no-color", "root-user-action", "cache-dir", "no-cache-dir"}


def pip_settings() -> dict[str, str]:
    """pip's configured settings (its files' and PIP_* variables'), the environment's winning."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                            check=True).stdout
    settings: dict[str, str] = {}
    # pip's order: its [global] section, then [install] (the command's own), then PIP_* variables
    for line in sorted(listed.splitlines(), key=lambda line: (line.startswith(":env:"), line.startswith("install."))):
        name, _, value = line.partition("=")
        settings[name.split(".", 1)[-1]] = value.strip().strip("'\"")
    return settings


def uv_arguments(settings: dict[str, str]) -> tuple[list[str], dict[str, str]] | None:
    """uv's flags and environment for pip's settings; None when one of them has no uv equivalent here."""
    flags, environment = ["--index-strategy", "unsafe-best-match"], {}
    for name, value in settings.items():
        if name in FLAGS:
            flags += [part for item in value.split() for part in (FLAGS[name], item)]
        elif name == "cert":
            environment["SSL_CERT_FILE"] = value
        elif name == "no-index" and value.lower() in ("1", "true", "yes", "on"):
            flags.append("--no-index")
        elif name not in HARMLESS:
            return None
    return flags, environment


def install_with_uv(target: str) -> bool:
    try:
        translated = uv_arguments(pip_settings())
    except (OSError, subprocess.CalledProcessError):
        return False
    if translated is None:
        return False
    flags, environment = translated
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    if subprocess.run([*pip, "uv"], stdout=subprocess.DEVNULL).returncode != 0:
        return False
    uv = [sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", sys.executable, "--compile-bytecode"]
    done = subprocess.run([*uv, *flags, "--editable", target], env={**os.environ, **environment})
    if done.returncode != 0:
        print("env/install.py: uv could not install it: installing with pip instead", file=sys.stderr)
    return done.returncode == 0


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python env/install.py PROJECT EXTRAS", file=sys.stderr)
        return 2
    target = f"{argv[0]}[{argv[1]}]"
    if install_with_uv(target):
        return 0
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    upgraded = subprocess.run([*pip, "--upgrade", "pip"])
    return upgraded.returncode or subprocess.run([*pip, "--editable", target]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
