"""Whether a login node's hpc-train understands what this laptop's asks of it (pure).

Versions only say which build runs (from git: every commit differs); what the two sides must agree on is the
protocol, a small integer (hpc_train.version.PROTOCOL) that `hpc-train --version` reports beside the version:

    hpc-train 0.1.dev412+g1a2b3c4 (protocol 1, oldest 1)

`oldest` is the oldest laptop's protocol that build still serves. A build before protocols says
`hpc-train 0.1.0` alone: protocol 0, older than any verb that needs one.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from hpc_train.remote.config import Remote
from hpc_train.remote.ssh import ssh_hint

# The protocol each forwarded verb needs of the login node's hpc-train; the rest need none (0). submit --remote
# runs `submit --in-snapshot` there, from protocol 1; a partition list (`--partition a,b`, each checked), from 2;
# `logs --job` (the job's own log), from 3.
NEEDS = {"submit": 1, "submit --partition A,B": 2, "logs --job": 3}
UPGRADE = "pip install --upgrade hpc-train"
# (a later build may say more inside the parentheses: what is known is still read)
VERSION_LINE = re.compile(r"hpc-train (\d\S*)(?: \(protocol (\d+)(?:, oldest (\d+))?[^)]*\))?")


@dataclass(frozen=True)
class Build:
    """One side's hpc-train: its version and protocol (None: a build before protocols), the oldest it serves."""

    version: str
    protocol: int | None
    oldest: int = 0


def parse_version_line(said: str) -> Build | None:
    """The build a `hpc-train --version` line names (protocol None for one before protocols), or None if it is no
    such line (an error instead)."""
    found = VERSION_LINE.match(said.strip())
    if found is None:
        return None
    protocol, oldest = found.group(2), found.group(3)
    return Build(found.group(1), None if protocol is None else int(protocol), int(oldest or 0))


def needed(verb: str) -> int:
    return NEEDS.get(verb, 0)


def upgrade_there(remote: Remote, environ: Mapping[str, str]) -> str:
    """The one command that upgrades hpc-train on the remote, through its own setup (its venv, its modules)."""
    setup = remote.setup.strip().rstrip(";").strip()
    return f"{ssh_hint(remote.host, environ)} {shlex.quote(f'{setup} && {UPGRADE}' if setup else UPGRADE)}"


def _spoken(build: Build) -> str:
    return "no protocol" if build.protocol is None else f"protocol {build.protocol}"


def protocol_problem(remote: Remote, there: Build, here: Build, verb: str,
                     environ: Mapping[str, str]) -> str | None:
    """Why the remote's hpc-train cannot serve `verb` from this one, in one line naming the older side and its
    upgrade; None when it can."""
    need = needed(verb)
    if (there.protocol or 0) < need:
        return (f"hpc-train {there.version} on {remote.host} is older than this one ({here.version}): it speaks "
                f"{_spoken(there)}, {verb} --remote needs protocol {need}; upgrade it there: "
                f"{upgrade_there(remote, environ)}")
    if (here.protocol or 0) < there.oldest:
        return (f"this hpc-train ({here.version}, {_spoken(here)}) is older than hpc-train {there.version} on "
                f"{remote.host}, which serves protocol {there.oldest} and newer; upgrade it here: {UPGRADE}")
    return None
