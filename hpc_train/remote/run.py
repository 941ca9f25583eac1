"""Run hpc-train on a remote: open (or reuse) the shared connection, then one ssh per verb, its output streamed.

A cold connection is opened by a probe that also checks, in the same round trip, that
the workdir can be written and that hpc-train there is compatible; a warm one is
reused without asking again (ssh -O check costs no round trip).
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from hpc_train import __version__
from hpc_train.errors import HpcTrainError
from hpc_train.remote import scripts
from hpc_train.remote.config import Remote
from hpc_train.remote.ssh import SSH_FAILED, check_argv, connect_timeout, control_folder, failure, ssh_argv

PROBE_SECONDS = 60  # beyond the connection: setup and `hpc-train --version` there


def ask(remote: Remote, script: str, environ: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a script there and capture its answer; ssh's own failure (unreachable, refused) as one line."""
    control_folder(environ).mkdir(parents=True, exist_ok=True, mode=0o700)
    argv = ssh_argv(remote.host, script, environ)
    try:
        result = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                timeout=connect_timeout(environ) + PROBE_SECONDS)
    except subprocess.TimeoutExpired:
        raise HpcTrainError(f"{remote.host} did not answer within {connect_timeout(environ) + PROBE_SECONDS} s "
                            f"(remote {remote.name}); check that `ssh {remote.host}` works") from None
    except FileNotFoundError:
        raise HpcTrainError("ssh is not installed here: install OpenSSH's client (apt-get install "
                            "openssh-client)") from None
    if result.returncode == SSH_FAILED:
        raise failure(remote.host, result.stderr, environ)
    return result


def master_pid(remote: Remote, environ: Mapping[str, str]) -> str | None:
    """The pid of the shared connection's master to the remote's host (ssh -O check: no round trip), or None."""
    try:
        result = subprocess.run(check_argv(remote.host, environ), capture_output=True, text=True,
                                stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return None
    found = re.search(r"pid=(\d+)", result.stderr)
    return found.group(1) if result.returncode == 0 and found else None


def close(remote: Remote, environ: Mapping[str, str]) -> None:
    """Close the shared connection (so that the next command probes again)."""
    argv = check_argv(remote.host, environ)
    argv[argv.index("check")] = "exit"
    subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL)


def probed_marker(remote: Remote, environ: Mapping[str, str]) -> Path:
    """A file saying which connection this remote (these very settings) was last probed through."""
    digest = hashlib.sha256(repr(remote).encode()).hexdigest()[:16]
    return control_folder(environ) / f"probed-{digest}"


def connect(remote: Remote, environ: Mapping[str, str]) -> None:
    """Make sure a shared connection is open to a remote fit to serve: probe it (workdir, setup, hpc-train's
    version) unless it was probed through the connection open now. Several remotes may share a host's connection."""
    marker = probed_marker(remote, environ)
    pid = master_pid(remote, environ)
    if pid is not None and marker.is_file() and marker.read_text() == pid:
        return
    probe = scripts.parse_probe(ask(remote, scripts.probe_script(remote), environ).stdout)
    problem = scripts.probe_problem(remote, probe, __version__)
    if problem is not None:
        marker.unlink(missing_ok=True)  # the next command probes again, once the user fixed it
        raise HpcTrainError(problem)
    marker.write_text(master_pid(remote, environ) or "")


def forward(remote: Remote, argv: Sequence[str], environ: Mapping[str, str], folder: str | None = None,
            tty: bool = False) -> int:
    """`hpc-train ARGV` on the remote, in `folder` (default its workdir): its output here, its exit code."""
    connect(remote, environ)
    try:
        return subprocess.run(ssh_argv(remote.host, scripts.verb_script(remote, argv, folder), environ,
                                       tty)).returncode
    except KeyboardInterrupt:  # logs --follow ends with Ctrl-C; ssh took it too
        return 130


def check(remote: Remote, environ: Mapping[str, str]) -> list[tuple[bool, str]]:
    """`remote check`'s lines, each (ok, text): reachable, hpc-train, Slurm, workdir."""
    started = time.monotonic()
    try:
        ask(remote, "true", environ)
    except HpcTrainError as error:
        return [(False, f"reachable: {error}")]
    lines = [(True, f"reachable: {remote.host} ({time.monotonic() - started:.2f} s)")]
    probe = scripts.parse_probe(ask(remote, scripts.probe_script(remote, slurm=True), environ).stdout)
    if not probe.setup_ok:
        lines.append((False, f"setup: {scripts.setup_problem(remote)}"))
    problem = scripts.version_problem(remote, probe.version, __version__)
    lines.append((problem is None, problem or f"hpc-train {probe.version} on {remote.host} (here {__version__})"))
    lines.append((probe.slurm is not None, f"Slurm: {probe.slurm} answers" if probe.slurm else
                  f"Slurm: does not answer on {remote.host} after --setup ({probe.slurm_problem or 'no sinfo on PATH'})"
                  "; the login node needs Slurm's commands and SLURM_CONF there"))
    lines.append((probe.workdir == "ok", f"workdir writable: {remote.workdir}" if probe.workdir == "ok" else
                  f"workdir not writable: {remote.workdir} ({probe.workdir}); pick another: hpc-train remote remove "
                  f"{remote.name}, then remote add {remote.name} ... --workdir DIR"))
    return lines
