"""Run hpc-train on a remote: open (or reuse) the shared connection, then one ssh per verb, its output streamed.

A cold connection is opened by a probe that also asks, in the same round trip, whether
the workdir can be written and which hpc-train answers there (its version and protocol);
a warm one is reused without asking again (ssh -O check costs no round trip): what the
probe found is kept beside the connection's socket, and each verb checks the protocol it
needs against it before anything is copied or run there.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from hpc_train.errors import HpcTrainError
from hpc_train.remote import children, scripts
from hpc_train.remote.config import Remote
from hpc_train.remote.protocol import Build, parse_version_line, protocol_problem
from hpc_train.version import OLDEST_PROTOCOL, PROTOCOL, __version__
from hpc_train.remote.ssh import (SSH_FAILED, check_argv, connect_timeout, control_folder, failure, slurm_timeout,
                                  ssh_argv)
from hpc_train.runs.state import read_json_object, write_json_atomically

PROBE_SECONDS = 60  # beyond the connection: setup and `hpc-train --version` there
HERE = Build(__version__, PROTOCOL, OLDEST_PROTOCOL)


def ask(remote: Remote, script: str, environ: Mapping[str, str], more_seconds: int = 0,
        reached: str = "") -> subprocess.CompletedProcess[str]:
    """Run a script there and capture its answer; ssh's own failure (unreachable, refused) as one line. `reached`:
    what was running there, once ssh is known to work (a script that outlives its bound is then not ssh's fault)."""
    control_folder(environ).mkdir(parents=True, exist_ok=True, mode=0o700)
    argv = ssh_argv(remote.host, script, environ)
    seconds = connect_timeout(environ) + PROBE_SECONDS + more_seconds
    try:
        result = children.run(argv, timeout=seconds)  # (killed at exit: a silent remote's thread is left behind)
    except subprocess.TimeoutExpired:
        if reached:
            raise HpcTrainError(f"{reached} on {remote.host} did not finish within {seconds} s (ssh works); try "
                                f"remote {remote.name}'s --setup there by hand (ssh {remote.host})") from None
        raise HpcTrainError(f"{remote.host} did not answer within {seconds} s "
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


def connect(remote: Remote, environ: Mapping[str, str], verb: str = "") -> None:
    """Make sure a shared connection is open to a remote fit to serve `verb`: probe it (workdir, setup, hpc-train's
    version and protocol) unless it was probed through the connection open now, then check the protocol `verb`
    needs. Several remotes may share a host's connection."""
    marker = probed_marker(remote, environ)
    pid = master_pid(remote, environ)
    known = read_json_object(marker)  # what the last probe through this connection found (unreadable: nothing)
    if pid is None or known.get("pid") != pid:
        probe = scripts.parse_probe(ask(remote, scripts.probe_script(remote), environ).stdout)
        problem = scripts.probe_problem(remote, probe)
        if problem is not None:
            marker.unlink(missing_ok=True)  # the next command probes again, once the user fixed it
            raise HpcTrainError(problem)
        known = {"pid": master_pid(remote, environ) or "", "version": probe.version}
        write_json_atomically(marker, known)
    there = parse_version_line(str(known.get("version")))
    problem = protocol_problem(remote, there, HERE, verb, environ) if there else None
    if problem is not None:
        marker.unlink(missing_ok=True)  # upgraded there while the connection stays open: the next command sees it
        raise HpcTrainError(problem)


def forward(remote: Remote, argv: Sequence[str], environ: Mapping[str, str], folder: str | None = None,
            tty: bool = False) -> int:
    """`hpc-train ARGV` on the remote, in `folder` (default its workdir): its output here, its exit code."""
    verb = "logs --job" if argv[:1] == ["logs"] and "--job" in argv else (argv[0] if argv else "")
    connect(remote, environ, verb)
    try:
        return subprocess.run(ssh_argv(remote.host, scripts.verb_script(remote, argv, folder), environ,
                                       tty)).returncode
    except KeyboardInterrupt:  # logs --follow ends with Ctrl-C; ssh took it too
        return 130


def forward_submit(remote: Remote, argv: Sequence[str], environ: Mapping[str, str], folder: str | None = None,
                   verb: str = "submit") -> tuple[int, str]:
    """`hpc-train submit ...` there, as `forward`, its stdout (the job id) passed on and returned too; `verb`: the
    protocol it needs (a partition list: `submit --partition A,B`)."""
    import sys

    connect(remote, environ, verb)
    result = subprocess.run(ssh_argv(remote.host, scripts.verb_script(remote, argv, folder), environ),
                            stdout=subprocess.PIPE, text=True)
    sys.stdout.write(result.stdout)
    sys.stdout.flush()
    return result.returncode, result.stdout


def check(remote: Remote, environ: Mapping[str, str]) -> list[tuple[bool, str]]:
    """`remote check`'s lines, each (ok, text): reachable, hpc-train, Slurm, workdir. Each Slurm call there is
    bounded (HPC_TRAIN_REMOTE_SLURM_TIMEOUT); ssh is blamed only for ssh's own failure."""
    started = time.monotonic()
    try:
        ask(remote, "true", environ)
    except HpcTrainError as error:
        return [(False, f"reachable: {error}")]
    lines = [(True, f"reachable: {remote.host} ({time.monotonic() - started:.2f} s)")]
    seconds = slurm_timeout(environ)
    script = scripts.probe_script(remote, slurm_seconds=seconds)
    try:
        probe = scripts.parse_probe(ask(remote, script, environ, len(scripts.SLURM_CALLS) * (seconds + 2),
                                        reached="--setup, hpc-train --version or sinfo").stdout)
    except HpcTrainError as error:
        return [*lines, (False, str(error))]
    if not probe.setup_ok:
        lines.append((False, f"setup: {scripts.setup_problem(remote)}"))
    lines.append(_build_line(remote, probe.version, environ))
    lines.append(scripts.slurm_line(remote, probe, seconds))
    lines.append((probe.workdir == "ok", f"workdir writable: {remote.workdir}" if probe.workdir == "ok" else
                  f"workdir not writable: {remote.workdir} ({probe.workdir}); pick another: hpc-train remote remove "
                  f"{remote.name}, then remote add {remote.name} ... --workdir DIR"))
    return lines


def _build_line(remote: Remote, said: str | None, environ: Mapping[str, str]) -> tuple[bool, str]:
    """hpc-train there: it runs, and speaks the protocol of every verb (submit's is the highest)."""
    problem = scripts.build_problem(remote, said)
    there = parse_version_line(said or "")
    if problem is None and there is not None:
        problem = protocol_problem(remote, there, HERE, "submit", environ)
    if problem is not None or there is None:
        return False, str(problem)
    return True, (f"hpc-train {there.version} on {remote.host}, protocol {there.protocol} (here {HERE.version}, "
                  f"protocol {HERE.protocol})")
