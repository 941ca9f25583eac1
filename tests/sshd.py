"""A real OpenSSH sshd on 127.0.0.1 as the login host of the tests' remotes (key login, pinned host key), and the
environment of a "laptop" that reaches it with ssh and rsync alone (no Slurm, no hpc-train on PATH)."""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.net import free_port_block

ROOT = Path(__file__).resolve().parents[1]
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
# Host names of the client's ssh config: the login host, the same host under a key never met, a closed port.
GOOD, STRANGER, CLOSED = "login", "stranger", "closed"


def sshd_possible() -> bool:
    """sshd, ssh, ssh-keygen and rsync here, and root (sshd's privilege separation needs it)."""
    return (os.geteuid() == 0 and os.path.isfile(SSHD)
            and all(shutil.which(tool) for tool in ("ssh", "ssh-keygen", "rsync")))


@dataclass(frozen=True)
class SshServer:
    folder: Path
    port: int
    client_config: Path  # for HPC_TRAIN_SSH_CONFIG: names GOOD, STRANGER and CLOSED
    runtime: Path  # a short folder for the control sockets (XDG_RUNTIME_DIR)
    login_bin: Path  # holds `hpc-train` (this checkout's) for the login side's PATH

    def setup(self, *exports: str) -> str:
        """A remote's --setup that puts this checkout's hpc-train on PATH (and any other `NAME=VALUE`)."""
        values = [f"PATH={self.login_bin}:$PATH", f"PYTHONPATH={shlex.quote(str(ROOT))}", *exports]
        return "export " + " ".join(values)


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().strip()


def start(folder: Path) -> tuple[subprocess.Popen[bytes], SshServer]:
    """sshd -D on a free port of 127.0.0.1, its keys and configs in `folder`; returns once it accepts."""
    host_key = _keygen(folder / "host_key")
    (folder / "authorized_keys").write_text(_keygen(folder / "id_ed25519") + "\n")
    port = free_port_block(2)
    closed = port + 1  # nobody listens there
    # The host key pinned under an alias; STRANGER's alias is in no known_hosts: a key never met.
    (folder / "known_hosts").write_text("hpc-train-test-sshd " + " ".join(host_key.split()[:2]) + "\n")
    (folder / "sshd_config").write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", "ListenAddress 127.0.0.2", f"HostKey {folder / 'host_key'}",
        f"PidFile {folder / 'sshd.pid'}", f"AuthorizedKeysFile {folder / 'authorized_keys'}",
        "StrictModes no", "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
        "PermitRootLogin prohibit-password", "MaxStartups 50", "MaxSessions 50", "LogLevel ERROR", ""]))
    common = ["  User root", f"  IdentityFile {folder / 'id_ed25519'}", "  IdentitiesOnly yes",
              "  IdentityAgent none", f"  UserKnownHostsFile {folder / 'known_hosts'}", "  GlobalKnownHostsFile /dev/null"]
    client = folder / "ssh_config"
    client.write_text("\n".join([
        f"Host {GOOD}", "  HostName 127.0.0.1", f"  Port {port}", "  HostKeyAlias hpc-train-test-sshd", *common,
        # (another address: a connection of its own, not GOOD's shared one)
        f"Host {STRANGER}", "  HostName 127.0.0.2", f"  Port {port}", "  HostKeyAlias hpc-train-other-host", *common,
        f"Host {CLOSED}", "  HostName 127.0.0.1", f"  Port {closed}", *common, ""]))
    login_bin = folder / "login-bin"
    login_bin.mkdir()
    (login_bin / "hpc-train").write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m hpc_train \"$@\"\n")
    (login_bin / "hpc-train").chmod(0o755)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation folder
    process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(folder / "sshd_config")], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"sshd did not start: {process.stderr.read().decode() if process.stderr else ''}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    runtime = Path(tempfile.mkdtemp(prefix="htr-"))  # short: a socket path holds at most 108 bytes
    return process, SshServer(folder, port, client, runtime, login_bin)


def stop(process: subprocess.Popen[bytes], server: SshServer) -> None:
    for socket_file in server.runtime.glob("hpc-train/cm-*"):  # the shared connections, before their server
        subprocess.run(["ssh", "-F", str(server.client_config), "-o", f"ControlPath={socket_file}", "-O", "exit",
                        GOOD], capture_output=True)
    process.terminate()
    process.wait(timeout=10)
    shutil.rmtree(server.runtime, ignore_errors=True)


def laptop_env(server: SshServer, home: Path) -> dict[str, str]:
    """A laptop's environment: PATH holds only ssh, rsync and python (no Slurm, no hpc-train)."""
    tools = home / "laptop-bin"
    tools.mkdir(parents=True, exist_ok=True)
    for tool in ("ssh", "rsync"):
        if not (tools / tool).exists():
            (tools / tool).symlink_to(shutil.which(tool) or tool)
    if not (tools / "python").exists():
        (tools / "python").symlink_to(sys.executable)
    return {"PATH": str(tools), "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_RUNTIME_DIR": str(server.runtime), "HPC_TRAIN_SSH_CONFIG": str(server.client_config),
            "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8"}


def hpc_train(env: dict[str, str], *args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The laptop's hpc-train."""
    return subprocess.run([sys.executable, "-m", "hpc_train", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
