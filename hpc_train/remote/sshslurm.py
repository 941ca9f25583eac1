"""Slurm's commands run on a remote's login node: a transport for the Slurm client over the shared connection.

The client builds the argv as it does here; this transport runs it there, in the remote's workdir after its
setup (where Slurm's commands and SLURM_CONF come from), bounded by `timeout` on both sides: coreutils' timeout
there, so that a silent controller ends the command there too, and the ssh here.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hpc_train.errors import HpcTrainError
from hpc_train.remote import children, scripts
from hpc_train.remote.config import Remote
from hpc_train.remote.ssh import SSH_FAILED, connect_timeout, failure, ssh_argv
from hpc_train.slurm.client import SlurmClient
from hpc_train.slurm.transport import NOT_FOUND, not_started, timed_out


def command_script(remote: Remote, argv: Sequence[str], seconds: float, folder: str | None = None) -> str:
    """cd to the folder (default: the workdir), run setup quietly, then ARGV within `seconds` (pure; every word
    quoted, setup the one shell on purpose)."""
    bound = max(1, int(seconds))
    command = shlex.join(argv)
    missing = shlex.quote(f"{argv[0]} not found on {remote.host} after remote {remote.name}'s --setup")
    return "\n".join([
        f"cd {scripts.shell_path(folder or remote.workdir)} 2>/dev/null",
        f"{{ {remote.setup}\n}} </dev/null >/dev/null 2>&1" if remote.setup.strip() else ":",
        f"command -v {shlex.quote(argv[0])} >/dev/null 2>&1 || {{ echo {missing} >&2; exit {NOT_FOUND}; }}",
        f"if command -v timeout >/dev/null 2>&1; then exec timeout -k 2 {bound} {command}; else exec {command}; fi",
    ])


@dataclass(frozen=True)
class SshTransport:
    """Runs Slurm's commands on the remote's login node (the client's env is the login node's own: ignored)."""

    remote: Remote
    environ: Mapping[str, str]

    def run(self, argv: Sequence[str], env: Mapping[str, str] | None, timeout: float, stdin: str | None = None,
            cwd: str | os.PathLike[str] | None = None) -> subprocess.CompletedProcess[str]:
        script = command_script(self.remote, argv, timeout, None if cwd is None else str(cwd))
        bound = connect_timeout(self.environ) + timeout + 5  # the connection, then the command's own bound there
        try:
            result = children.run(ssh_argv(self.remote.host, script, self.environ), timeout=bound, input=stdin)
        except subprocess.TimeoutExpired:
            return timed_out(argv, timeout)
        except OSError as error:
            return not_started(argv, f"ssh: {error.strerror or error}")
        if result.returncode == SSH_FAILED:
            raise failure(self.remote.host, result.stderr, self.environ)
        return result

    def has(self, command: str, env: Mapping[str, str] | None) -> bool:
        return self.run(["sh", "-c", f"command -v {shlex.quote(command)}"], env, 30).returncode == 0

    def start(self, argv: Sequence[str], env: Mapping[str, str] | None) -> subprocess.Popen[bytes]:
        raise HpcTrainError(f"{argv[0]} cannot be started on remote {self.remote.name} from here; run it there")


def slurm_there(remote: Remote, environ: Mapping[str, str]) -> SlurmClient:
    """A Slurm client whose commands run on the remote's login node."""
    return SlurmClient(None, SshTransport(remote, environ))
