"""OpenSSH's and rsync's argv for a remote, and their failures in one line (pure, but for the control folder).

Every command to a remote goes through one multiplexed connection (ControlMaster=auto,
ControlPersist): the first opens it, the next ones cost one round trip. BatchMode
makes ssh fail instead of asking (a password, an unknown host key); host keys are
checked as the user's ssh configuration says, never turned off here.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from hpc_train.errors import HpcTrainError

ENV_CONFIG = "HPC_TRAIN_SSH_CONFIG"  # an ssh config file used instead of ~/.ssh/config (ssh -F FILE)
ENV_TIMEOUT = "HPC_TRAIN_SSH_TIMEOUT"  # seconds to wait for a connection (ssh's ConnectTimeout)
ENV_SLURM_TIMEOUT = "HPC_TRAIN_REMOTE_SLURM_TIMEOUT"  # seconds each Slurm call of `remote check` may take there
CONNECT_TIMEOUT = 10
SLURM_TIMEOUT = 15
PERSIST = "10m"  # how long an idle shared connection stays open
ALIVE_INTERVAL, ALIVE_COUNT = 5, 3  # ssh's keep-alive: a silent server is dropped after 15 s
SSH_FAILED = 255  # ssh's own exit status when it could not run the command


def control_folder(environ: Mapping[str, str]) -> Path:
    """Where the shared connections' sockets live: short (a socket path has at most 108 bytes), the user's only."""
    runtime = environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "hpc-train"
    return Path(environ.get("HOME") or os.path.expanduser("~")) / ".cache" / "hpc-train"


def seconds(environ: Mapping[str, str], name: str, default: int) -> int:
    """Whole seconds from the variable `name` (default when unset); anything else refused in one line."""
    value = environ.get(name, "")
    if not value:
        return default
    if not value.isdigit() or int(value) < 1:
        raise HpcTrainError(f"{name}={value!r}: give whole seconds, e.g. {default}")
    return int(value)


def connect_timeout(environ: Mapping[str, str]) -> int:
    return seconds(environ, ENV_TIMEOUT, CONNECT_TIMEOUT)


def slurm_timeout(environ: Mapping[str, str]) -> int:
    return seconds(environ, ENV_SLURM_TIMEOUT, SLURM_TIMEOUT)


def ssh_options(environ: Mapping[str, str]) -> list[str]:
    """The options of every ssh we run: the shared connection, no prompts, a bounded connect."""
    config = environ.get(ENV_CONFIG)
    return [*(["-F", config] if config else []),
            "-o", "ControlMaster=auto", "-o", f"ControlPath={control_folder(environ) / 'cm-%C'}",
            "-o", f"ControlPersist={PERSIST}", "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={connect_timeout(environ)}",
            # A login node that stops answering ends the connection (its master and clients) within 15 s, not at
            # TCP's minutes: nothing of ours waits on it long after hpc-train exits.
            "-o", f"ServerAliveInterval={ALIVE_INTERVAL}", "-o", f"ServerAliveCountMax={ALIVE_COUNT}"]


def ssh_argv(host: str, script: str, environ: Mapping[str, str], tty: bool = False) -> list[str]:
    """ssh running `script` (one shell line, quoted by its builder) on `host`; a terminal with `tty`."""
    return ["ssh", *ssh_options(environ), *(["-tt"] if tty else []), "--", host, script]


def check_argv(host: str, environ: Mapping[str, str]) -> list[str]:
    """ssh -O check: exit 0 when a shared connection to `host` is open (no round trip)."""
    return ["ssh", *ssh_options(environ), "-O", "check", "--", host]


def rsync_argv(sources: Sequence[str], destination: str, environ: Mapping[str, str],
               options: Sequence[str] = ()) -> list[str]:
    """rsync over the same shared connection; -s keeps remote paths away from the remote shell's parsing."""
    return ["rsync", "-a", "-s", *options, "-e", shlex.join(["ssh", *ssh_options(environ)]), *sources, destination]


def ssh_hint(host: str, environ: Mapping[str, str]) -> str:
    """The ssh command a user types to meet `host` (with the config file hpc-train uses)."""
    config = environ.get(ENV_CONFIG)
    return shlex.join(["ssh", *(["-F", config] if config else []), host])


def failure(host: str, stderr: str, environ: Mapping[str, str]) -> HpcTrainError:
    """ssh's failure (exit 255) as one line saying what to do (pure)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    said = lines[-1] if lines else "no answer"
    text = stderr.lower()
    hint = ssh_hint(host, environ)
    if "host key verification failed" in text or "remote host identification has changed" in text:
        return HpcTrainError(f"{host}: host key unknown or changed, refused; run `{hint}` once, check the key's "
                             "fingerprint with your cluster's documentation, accept it, then try again")
    if "permission denied" in text:
        return HpcTrainError(f"{host} refused the login ({said}); `{hint}` must log in without a password: "
                             "a key or an agent (see docs/laptop.md)")
    if any(words in text for words in ("connection refused", "timed out", "no route to host", "could not resolve",
                                       "network is unreachable", "connection closed", "connection reset")):
        return HpcTrainError(f"{host} cannot be reached: {said}; check that `{hint}` works")
    return HpcTrainError(f"ssh {host} failed: {said}; check that `{hint}` works")
