"""Accounting for a local cluster (`cluster up --accounting`): slurmdbd, and a MariaDB of the cluster's own.

The database server is not the system's: it runs from a data directory in the
cluster's directory, on 127.0.0.1 at the cluster's own port, as the mysql user,
so it can neither clash with nor touch a MariaDB or MySQL already here. slurmdbd
reaches it over TCP with a generated password, and finds slurmdbd.conf beside
slurm.conf (Slurm looks next to SLURM_CONF). The renderers are pure; `start`
and what it calls are the side effects.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from hpc_train.errors import HpcTrainError
from hpc_train.slurm.client import SlurmClient
from hpc_train.localslurm import daemons
from hpc_train.localslurm.spec import LocalCluster

PROGRAMS = ("slurmdbd", "sacctmgr", "sacct", "mariadbd", "mariadb-install-db", "mariadb", "mariadb-admin")
PACKAGES = ("slurmdbd", "mariadb-server")
CLUSTER_NAME = "hpctrain"  # slurm.conf's ClusterName
DATABASE = "slurm_acct_db"
DATABASE_USER = "slurm"
# The first start of slurmdbd creates its tables, which takes a while on a busy machine.
START_TIMEOUT = 60.0


def mariadb_dir(cluster: LocalCluster) -> Path:
    """The database server's own directory (the mysql user's): data, socket, its pid file and log."""
    return cluster.directory / "mariadb"


def dbd_conf(cluster: LocalCluster) -> Path:
    return cluster.conf.with_name("slurmdbd.conf")  # where slurmdbd looks: beside SLURM_CONF


def password_file(cluster: LocalCluster) -> Path:
    return cluster.directory / "slurmdbd.password"


def render_dbd_conf(cluster: LocalCluster, password: str) -> str:
    """slurmdbd.conf: slurmdbd on the cluster's port, storing into the cluster's MariaDB over TCP."""
    return "\n".join([
        "# Written by hpc-train cluster up --accounting; rewritten on every up. Mode 600: it holds a password.",
        "AuthType=auth/munge",
        f"AuthInfo=socket={cluster.munge_socket}",
        "DbdHost=localhost",
        f"DbdPort={cluster.dbd_port}",
        "SlurmUser=root",
        f"PidFile={cluster.pid_file('slurmdbd')}",
        f"LogFile={cluster.log_file('slurmdbd')}",
        "StorageType=accounting_storage/mysql",
        "StorageHost=127.0.0.1",
        f"StoragePort={cluster.database_port}",
        f"StorageUser={DATABASE_USER}",
        f"StoragePass={password}",
        f"StorageLoc={DATABASE}",
    ]) + "\n"


def install_db_command(cluster: LocalCluster) -> list[str]:
    """Create the system tables in a fresh data directory (--no-defaults: nothing from /etc/mysql)."""
    return ["mariadb-install-db", "--no-defaults", f"--datadir={mariadb_dir(cluster) / 'data'}", "--user=mysql",
            "--auth-root-authentication-method=socket", "--skip-test-db"]


def mariadbd_command(cluster: LocalCluster) -> list[str]:
    """The cluster's database server: its own files and port, reachable from this machine only."""
    m = mariadb_dir(cluster)
    return ["mariadbd", "--no-defaults", "--user=mysql", f"--datadir={m / 'data'}", f"--socket={m / 'mariadbd.sock'}",
            f"--pid-file={m / 'mariadbd.pid'}", f"--log-error={m / 'mariadbd.log'}", "--bind-address=127.0.0.1",
            f"--port={cluster.database_port}", "--skip-name-resolve",
            # Slurm's advice for slurmdbd (its table upgrades hold locks for long), at a test cluster's size.
            "--innodb-buffer-pool-size=64M", "--innodb-lock-wait-timeout=900"]


def client_command(cluster: LocalCluster, program: str = "mariadb") -> list[str]:
    """mariadb or mariadb-admin as the database's root, through the socket (root here is root there)."""
    return [program, "--no-defaults", f"--socket={mariadb_dir(cluster) / 'mariadbd.sock'}", "--user=root"]


def grant_sql(password: str) -> str:
    """slurmdbd's database user, from 127.0.0.1 only (names are not resolved), with the password of the file."""
    user = f"'{DATABASE_USER}'@'127.0.0.1'"
    return (f"CREATE USER IF NOT EXISTS {user} IDENTIFIED BY '{password}';\n"
            f"ALTER USER {user} IDENTIFIED BY '{password}';\n"
            f"GRANT ALL ON {DATABASE}.* TO {user};\n")


def start(cluster: LocalCluster) -> None:
    """Install what is missing, start MariaDB and slurmdbd if not running, register the cluster (idempotent)."""
    daemons.install_missing(PROGRAMS, PACKAGES, " and ".join(PACKAGES))
    password = _password(cluster)
    _write_dbd_conf(cluster, password)
    if daemons.running_pid(cluster, "mariadbd") is None:
        _init_datadir(cluster)
        _start_mariadbd(cluster)
    _run(cluster, client_command(cluster), "creating slurmdbd's database user", stdin=grant_sql(password))
    if daemons.running_pid(cluster, "slurmdbd") is None:
        _run(cluster, ["slurmdbd"], "starting slurmdbd")
        _wait(cluster, "slurmdbd", lambda: _sacctmgr(cluster, "list", "cluster").returncode == 0)
        daemons.say("started slurmdbd")
    if CLUSTER_NAME not in _sacctmgr(cluster, "-n", "-P", "list", "cluster", "format=Cluster").stdout.split():
        _check(cluster, _sacctmgr(cluster, "-i", "add", "cluster", CLUSTER_NAME), f"registering cluster {CLUSTER_NAME}")


def _password(cluster: LocalCluster) -> str:
    """The database password: made once, kept 0600 (the database keeps it across `down` and `up`)."""
    path = password_file(cluster)
    if not path.exists():
        path.touch(mode=0o600)
        path.write_text(secrets.token_hex(16) + "\n")
    path.chmod(0o600)
    return path.read_text().strip()


def _write_dbd_conf(cluster: LocalCluster, password: str) -> None:
    """slurmdbd refuses a slurmdbd.conf others may read, or not owned by its SlurmUser (root here)."""
    path = dbd_conf(cluster)
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(render_dbd_conf(cluster, password))


def _init_datadir(cluster: LocalCluster) -> None:
    m = mariadb_dir(cluster)
    m.mkdir(mode=0o750, exist_ok=True)
    shutil.chown(m, "mysql", "mysql")  # mariadbd runs as mysql: the data, socket and pid file are its own
    if not (m / "data" / "mysql").is_dir():
        _run(cluster, install_db_command(cluster), "initialising the database in " + str(m / "data"))


def _start_mariadbd(cluster: LocalCluster) -> None:
    """mariadbd stays in the foreground: started in a session of its own, it outlives this command."""
    m = mariadb_dir(cluster)
    (m / "mariadbd.pid").unlink(missing_ok=True)
    server = subprocess.Popen(mariadbd_command(cluster), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    _wait(cluster, "mariadbd", lambda: server.poll() is not None or ((m / "mariadbd.pid").exists() and _run_quietly(
        [*client_command(cluster, "mariadb-admin"), "ping"]).returncode == 0))
    if server.poll() is not None:  # e.g. its port taken: the reason is its last error but "Aborting"
        errors = [line.split("[ERROR]", 1)[1].strip() for line in (m / "mariadbd.log").read_text(
            errors="replace").splitlines() if "[ERROR]" in line and not line.endswith("Aborting")]
        raise HpcTrainError(f"mariadbd exited at once ({(errors or ['no error logged'])[-1][:200]}); "
                            f"see {m / 'mariadbd.log'}")
    # It writes its pid file in its own directory; we keep a copy where `down` and `status` look, as for munged.
    cluster.pid_file("mariadbd").write_text((m / "mariadbd.pid").read_text())
    daemons.say("started mariadbd")


def _wait(cluster: LocalCluster, daemon: str, ready: Callable[[], bool]) -> None:
    if not daemons.wait_until(ready, START_TIMEOUT):
        log = mariadb_dir(cluster) / "mariadbd.log" if daemon == "mariadbd" else cluster.log_file(daemon)
        raise HpcTrainError(f"{daemon} did not answer within {START_TIMEOUT:.0f} s; see {log}")


def _sacctmgr(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return SlurmClient.local(daemons.slurm_env(cluster)).sacctmgr(args, timeout=120)


def _run(cluster: LocalCluster, command: list[str], doing: str, stdin: str | None = None) -> None:
    _check(cluster, _run_quietly(command, daemons.slurm_env(cluster), stdin), doing)


def _check(cluster: LocalCluster, result: subprocess.CompletedProcess[str], doing: str) -> None:
    if result.returncode != 0:
        said = ((result.stderr + result.stdout).strip().splitlines() or ["no output"])[-1]
        raise HpcTrainError(f"{doing} failed ({said}); see the logs in {cluster.directory / 'log'} and "
                            f"{mariadb_dir(cluster)}")


def _run_quietly(command: list[str], env: dict[str, str] | None = None,
                 stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return daemons.run(command, env, stdin)
