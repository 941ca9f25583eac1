from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.errors import HpcTrainError
from hpc_train.localslurm.control import configuration_changes
from hpc_train.localslurm.spec import LocalCluster, hosts_line, render_gres_conf, render_slurm_conf


def test_the_configuration_lives_in_the_clusters_directory() -> None:
    cluster = LocalCluster(Path("/tmp/x"), nodes="node[9-10]", cpus=4, controller_port=7000)
    conf = render_slurm_conf(cluster)
    assert "SlurmctldPort=7000" in conf
    assert "AuthInfo=socket=/tmp/x/munge/munge.socket,cred_expire=5" in conf  # requeued jobs wait 5 s
    assert "SchedulerParameters=bf_interval=1,sched_interval=5" in conf  # and then start within a second
    assert "AccountingStorageType=accounting_storage/none" in conf
    assert "NodeName=node9 NodeHostname=localhost Port=7001 CPUs=4 Gres=gpu:2 State=UNKNOWN" in conf
    assert "NodeName=node10 NodeHostname=localhost Port=7002 CPUs=4 Gres=gpu:2 State=UNKNOWN" in conf
    assert all(line.split("=", 1)[1].startswith("/tmp/x") for line in conf.splitlines()
               if line.split("=")[0].endswith(("Location", "SpoolDir", "PidFile", "LogFile")))
    # No MpiParams=ports: reserved ports are the same on every "node", and these nodes share one network stack.
    assert "MpiParams" not in conf


def test_nodes_resolve_through_a_marked_hosts_line() -> None:
    cluster = LocalCluster(Path("/tmp/x"), nodes="node[1-2]")
    assert hosts_line(cluster) == "127.0.0.1 node1 node2 # hpc-train local cluster /tmp/x"
    assert cluster.daemons == ("munged", "slurmctld", "slurmd-node1", "slurmd-node2")


@pytest.mark.parametrize("settings, message", [
    ({"nodes": "node[1-"}, "--nodes='node\\[1-'"), ({"cpus": 0}, "--cpus 0"), ({"controller_port": 80}, "--port 80"),
    ({"gpus_per_node": -1}, "--gpus-per-node -1"), ({"gpus_per_node": 17}, "--gpus-per-node 17: give 0"),
])
def test_bad_settings_are_refused(settings: dict, message: str) -> None:
    with pytest.raises(HpcTrainError, match=message):
        LocalCluster(**settings)


def test_nodes_declare_their_gpus_through_gres_with_a_device_file_each() -> None:
    cluster = LocalCluster(Path("/tmp/x"), nodes="node[1-2]", gpus_per_node=2)
    conf = render_slurm_conf(cluster).splitlines()
    assert "GresTypes=gpu" in conf
    assert [line for line in conf if line.startswith("NodeName=")] == [
        f"NodeName=node{n} NodeHostname=localhost Port={6917 + n} CPUs={cluster.cpus} Gres=gpu:2 State=UNKNOWN"
        for n in (1, 2)]
    assert render_gres_conf(cluster).splitlines()[1:] == [
        "AutoDetect=off", "Name=gpu File=/tmp/x/dev/gpu0", "Name=gpu File=/tmp/x/dev/gpu1"]


def test_a_cluster_without_gpus_declares_none() -> None:
    cluster = LocalCluster(Path("/tmp/x"), nodes="node1", gpus_per_node=0)
    assert "Gres" not in render_slurm_conf(cluster) and "Name=gpu" not in render_gres_conf(cluster)


def test_up_restarts_only_for_files_it_would_change() -> None:
    wanted = {"slurm.conf": "new", "gres.conf": "same"}
    assert configuration_changes({"slurm.conf": "old", "gres.conf": "same"}, wanted) == ["slurm.conf"]
    assert configuration_changes({"slurm.conf": "new", "gres.conf": "same"}, wanted) == []
    assert configuration_changes({"slurm.conf": None, "gres.conf": None}, wanted) == []  # a first up
