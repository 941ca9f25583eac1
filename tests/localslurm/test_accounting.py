"""The pure parts of accounting: slurm.conf's lines, slurmdbd.conf, the MariaDB commands and grants."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.errors import HpcTrainError
from hpc_train.localslurm.accounting import (dbd_conf, grant_sql, install_db_command, mariadbd_command,
                                             render_dbd_conf)
from hpc_train.localslurm.spec import LocalCluster, render_slurm_conf

CLUSTER = LocalCluster(Path("/tmp/x"), nodes="acct[1-2]", cpus=1, controller_port=7317, accounting=True)


def test_slurmctld_sends_its_records_to_the_clusters_own_slurmdbd() -> None:
    conf = render_slurm_conf(CLUSTER)
    assert "AccountingStorageType=accounting_storage/slurmdbd" in conf and "accounting_storage/none" not in conf
    assert "AccountingStorageHost=localhost\nAccountingStoragePort=7617\n" in conf
    # Clients reach slurmdbd through this munge socket, not AuthInfo's: without it they try the system's.
    assert "AccountingStoragePass=/tmp/x/munge/munge.socket" in conf


def test_without_accounting_nothing_changes() -> None:
    plain = LocalCluster(Path("/tmp/x"), nodes="acct[1-2]", cpus=1, controller_port=7317)
    assert "AccountingStorageType=accounting_storage/none" in render_slurm_conf(plain)
    assert "AccountingStorage" not in render_slurm_conf(plain).replace("AccountingStorageType=accounting_storage/none",
                                                                       "")
    assert plain.daemons == ("munged", "slurmctld", "slurmd-acct1", "slurmd-acct2")


def test_the_database_and_slurmdbd_start_after_munged_and_before_slurmctld() -> None:
    assert CLUSTER.daemons == ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd-acct1", "slurmd-acct2")


def test_slurmdbd_conf_lies_beside_slurm_conf_and_stores_into_the_clusters_mariadb() -> None:
    assert dbd_conf(CLUSTER) == Path("/tmp/x/slurmdbd.conf")  # slurmdbd looks beside SLURM_CONF
    conf = render_dbd_conf(CLUSTER, "secret")
    for line in ("DbdPort=7617", "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1", "StoragePort=7618",
                 "StorageUser=slurm", "StoragePass=secret", "AuthInfo=socket=/tmp/x/munge/munge.socket",
                 "PidFile=/tmp/x/run/slurmdbd.pid", "LogFile=/tmp/x/log/slurmdbd.log", "SlurmUser=root"):
        assert f"\n{line}\n" in conf, line


def test_mariadb_is_its_own_server_in_the_clusters_directory_on_localhost_only() -> None:
    command = mariadbd_command(CLUSTER)
    assert command[:2] == ["mariadbd", "--no-defaults"]  # --no-defaults first: nothing from /etc/mysql
    assert {"--datadir=/tmp/x/mariadb/data", "--socket=/tmp/x/mariadb/mariadbd.sock", "--port=7618",
            "--bind-address=127.0.0.1", "--skip-name-resolve", "--user=mysql"} <= set(command)
    assert install_db_command(CLUSTER)[:2] == ["mariadb-install-db", "--no-defaults"]
    assert "--datadir=/tmp/x/mariadb/data" in install_db_command(CLUSTER)


def test_slurmdbds_user_is_made_once_and_its_password_set_on_every_up() -> None:
    sql = grant_sql("abc123")
    assert "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'abc123';" in sql
    assert "ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'abc123';" in sql
    assert "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" in sql


def test_a_port_without_room_for_slurmdbd_and_mariadb_is_refused() -> None:
    with pytest.raises(HpcTrainError, match=r"--port 65300 --accounting: pick a port below 65235"):
        LocalCluster(nodes="n1", controller_port=65300, accounting=True)
    LocalCluster(nodes="n1", controller_port=65300)  # fine without accounting
