"""remotes.yaml: the remotes a user added (`hpc-train remote add`), under $XDG_CONFIG_HOME/hpc-train/.

    remotes:
      cluster:
        host: login.example.org     # what `ssh HOST` reaches (~/.ssh/config applies)
        workdir: ~/hpc              # absolute, or under the login node's home
        setup: source ~/venvs/hpc/bin/activate   # raw shell on purpose, run before hpc-train
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hpc_train.errors import HpcTrainError

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
ENV_REMOTE = "HPC_TRAIN_REMOTE"


@dataclass(frozen=True)
class Remote:
    """A login node: `host` for ssh, `workdir` there (runs/ under it), `setup` shell run before hpc-train."""

    name: str
    host: str
    workdir: str
    setup: str = ""

    def __post_init__(self) -> None:
        if not NAME.fullmatch(self.name):
            raise HpcTrainError(f"remote name {self.name!r}: use letters, digits, '.', '_' and '-' (e.g. cluster)")
        if not self.host or self.host.startswith("-") or any(char.isspace() for char in self.host):
            raise HpcTrainError(f"--host {self.host!r}: give what `ssh HOST` reaches (a name of ~/.ssh/config, "
                                "or user@host), without spaces or a leading '-'")
        if not (self.workdir.startswith("/") or self.workdir == "~" or self.workdir.startswith("~/")):
            raise HpcTrainError(f"--workdir {self.workdir!r}: give an absolute path on the login node, or one under "
                                "its home as ~/DIR")
        if "\n" in self.setup or "\0" in self.setup:
            raise HpcTrainError("--setup: one line of shell, e.g. 'source ~/venvs/hpc/bin/activate'")


def config_file(environ: Mapping[str, str]) -> Path:
    """$XDG_CONFIG_HOME/hpc-train/remotes.yaml (default ~/.config)."""
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".config")
    return Path(base) / "hpc-train" / "remotes.yaml"


def parse(text: str, source: str) -> dict[str, Remote]:
    """The remotes of remotes.yaml's text (pure); a file that is not ours is refused in one line."""
    import yaml

    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as error:
        raise HpcTrainError(f"{source}: not YAML ({str(error).splitlines()[0]}); fix or remove it") from None
    remotes = data.get("remotes") if isinstance(data, dict) else None
    if not isinstance(remotes, dict) or not all(isinstance(entry, dict) for entry in remotes.values()):
        raise HpcTrainError(f"{source}: expected `remotes:` mapping names to host, workdir and setup; fix or remove it")
    try:
        return {str(name): Remote(str(name), str(entry.get("host", "")), str(entry.get("workdir", "")),
                                  str(entry.get("setup") or "")) for name, entry in remotes.items()}
    except HpcTrainError as error:
        raise HpcTrainError(f"{source}: {error}") from None


def render(remotes: Mapping[str, Remote]) -> str:
    """remotes.yaml's text for these remotes (pure)."""
    import yaml

    entries = {name: {"host": remote.host, "workdir": remote.workdir, **({"setup": remote.setup} if remote.setup
                                                                        else {})}
               for name, remote in sorted(remotes.items())}
    return yaml.safe_dump({"remotes": entries}, sort_keys=False, default_flow_style=False)


def load(environ: Mapping[str, str]) -> dict[str, Remote]:
    """The remotes of this user's remotes.yaml; none when there is no file."""
    path = config_file(environ)
    return parse(path.read_text(), str(path)) if path.is_file() else {}


def save(remotes: Mapping[str, Remote], environ: Mapping[str, str]) -> Path:
    from hpc_train.runs.state import write_text_atomically

    path = config_file(environ)
    write_text_atomically(path, render(remotes))  # a crash mid-write must not lose every remote
    return path


def find(name: str, environ: Mapping[str, str]) -> Remote:
    """The remote called `name`, or a one-line refusal naming the known ones."""
    remotes = load(environ)
    if name not in remotes:
        known = ", ".join(sorted(remotes)) or "none yet"
        raise HpcTrainError(f"unknown remote {name!r} (known: {known}); add it: hpc-train remote add {name} "
                            "--host HOST --workdir DIR")
    return remotes[name]


def chosen(given: str | None, environ: Mapping[str, str]) -> str | None:
    """The remote a command runs on: --remote, else $HPC_TRAIN_REMOTE, else none (here)."""
    return given or environ.get(ENV_REMOTE) or None
