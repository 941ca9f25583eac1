"""Install hpc-train (editable, with the extras asked) and its dependencies into the Python that runs this (the
project's .venv, from env/setup.sh): with uv where it can be had, else with pip.

    .venv/bin/python env/install.py PROJECT EXTRAS

pip downloads and unpacks one wheel after another: 67 s here for TensorFlow and the rest into a new .venv; uv
(Astral's installer, from PyPI) does the same in parallel: 26 s, bytecode compiled (AMD EPYC, 2 cores; docs/
development.md). uv reads none of pip's configuration, so what pip's says about where packages come from (indexes,
find-links, constraints, a certificate) is passed on to uv, in its environment; a setting it cannot pass on, or a uv
that fails for any reason, and pip installs as before. Standard library only: it runs before anything is installed.

With HPC_TRAIN_UV_CACHE_FIRST=1 (env/test.sh sets it) uv installs from its cache alone where it can: the versions
it resolved before, without asking any index (a new .venv in 19-22 s here, where the indexes' answers alone took 0
to 70 s); a cache that lacks anything (a fresh machine, CI) and it asks the indexes as without the variable. Not for
env/setup.sh alone: a cache's versions can be older than the indexes' newest, and an index it never cached is not
asked at all.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

# pip's settings (`pip config list`) and uv's variables for them, passed in uv's environment, never on its command
# line (an index's URL may hold a password). pip weighs an extra index equal to its main one (the best version
# anywhere): so does uv with unsafe-best-match.
VARIABLES = {"index-url": ("UV_DEFAULT_INDEX", " "), "extra-index-url": ("UV_INDEX", " "),
             "find-links": ("UV_FIND_LINKS", ","), "constraint": ("UV_CONSTRAINT", " ")}
# Set to 1: uv's cache alone first (the module's docstring says when that is wanted).
CACHE_FIRST = "HPC_TRAIN_UV_CACHE_FIRST"
# Settings of pip that change nothing of what it installs.
HARMLESS = {"disable-pip-version-check", "default-timeout", "timeout", "no-warn-script-location", "progress-bar",
            "quiet", "verbose", "no-color", "root-user-action", "cache-dir", "no-cache-dir", "config-file"}
# The sections `pip install` reads, in pip's order: [global], then [install], then PIP_* variables.
SECTIONS = ("global.", "install.", ":env:.")


def pip_settings() -> dict[str, str]:
    """What pip's configuration (its files and PIP_* variables) sets for `pip install`, the later section winning."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                            check=True).stdout
    settings: dict[str, str] = {}
    for section in SECTIONS:
        for line in listed.splitlines():
            name, _, value = line.partition("=")
            if name.startswith(section):
                settings[name.removeprefix(section)] = str(ast.literal_eval(value))  # (printed as a Python string)
    return settings


def uv_environment(settings: dict[str, str]) -> dict[str, str] | None:
    """uv's environment for pip's settings; None when one of them has no uv equivalent here."""
    environment = {"UV_INDEX_STRATEGY": "unsafe-best-match"}
    for name, value in settings.items():
        if name in VARIABLES:
            variable, separator = VARIABLES[name]
            environment[variable] = separator.join(value.split())  # (pip's lists: spaces or lines)
        elif name == "cert":
            environment["SSL_CERT_FILE"] = value
        elif name == "no-index" and value.lower() in ("1", "true", "yes", "on"):
            environment["UV_NO_INDEX"] = "1"
        elif name not in HARMLESS:
            return None
    return environment


def pip_install(*arguments: str) -> int:
    return subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                           *arguments]).returncode


def install_with_uv(target: str) -> bool:
    """Installed with uv (itself installed with pip first); False where it could not be (pip's turn then)."""
    try:
        environment = uv_environment(pip_settings())
    except (OSError, ValueError, SyntaxError, subprocess.CalledProcessError):
        return False
    if environment is None or pip_install("uv") != 0:
        return False
    command = [sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", sys.executable,
               "--compile-bytecode", "--editable", target]
    environment = {**os.environ, **environment}
    # The cache first, where asked: what it cannot satisfy uv says at once (not shown), and the indexes are asked.
    cache_first = os.environ.get(CACHE_FIRST) == "1"
    if cache_first and subprocess.run([*command, "--offline"], env=environment, capture_output=True).returncode == 0:
        return True
    done = subprocess.run(command, env=environment)
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
    return pip_install("--upgrade", "pip") or pip_install("--editable", target)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
