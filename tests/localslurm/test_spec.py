from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.errors import HpcTrainError
from hpc_train.localslurm.control import configuration_changes
from hpc_train.localslurm.spec import (LocalCluster, hosts_line, render_gres_conf, render_site_script,
                                       render_slurm_conf)


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


def test_partitions_split_the_nodes_and_each_declares_its_gpus() -> None:
    cluster = LocalCluster(Path("/tmp/x"), partitions=("cpu:node[1-2]:0", "gpu:node[3-4]:2"), accounting=True)
    assert cluster.node_names == ("node1", "node2", "node3", "node4") and cluster.partition == "cpu"
    conf = render_slurm_conf(cluster).splitlines()
    assert [line for line in conf if line.startswith("PartitionName=")] == [
        "PartitionName=cpu Nodes=node[1-2] Default=YES MaxTime=INFINITE State=UP",
        "PartitionName=gpu Nodes=node[3-4] Default=NO MaxTime=INFINITE State=UP"]
    assert [("Gres=gpu:2" in line) for line in conf if line.startswith("NodeName=")] == [False, False, True, True]
    assert "AccountingStorageTRES=gres/gpu" in conf  # else sacct would show no job holding a GPU
    assert render_gres_conf(cluster).splitlines()[2:] == [
        "NodeName=node3 Name=gpu File=/tmp/x/dev/gpu0", "NodeName=node3 Name=gpu File=/tmp/x/dev/gpu1",
        "NodeName=node4 Name=gpu File=/tmp/x/dev/gpu0", "NodeName=node4 Name=gpu File=/tmp/x/dev/gpu1"]


def test_a_partition_without_gpus_takes_the_clusters_gpus_per_node() -> None:
    cluster = LocalCluster(Path("/tmp/x"), partitions=("a:n[1-2]", "b:n[2-3]"), gpus_per_node=1)
    assert cluster.node_names == ("n1", "n2", "n3") and cluster.gpus_on("n3") == 1


@pytest.mark.parametrize("partitions, message", [
    (("cpu",), "expected NAME:NODES"), (("cpu:n1:x",), "expected NAME:NODES"), (("1x:n1",), "expected NAME:NODES"),
    (("a:n1", "a:n2"), "given twice"), (("a:n1:0", "b:n1:2"), "n1 is in another partition"),
])
def test_bad_partitions_are_refused(partitions: tuple[str, ...], message: str) -> None:
    with pytest.raises(HpcTrainError, match=message):
        LocalCluster(partitions=partitions)


def test_the_site_firewall_is_slurms_prolog_and_epilog_through_wrappers(tmp_path: Path) -> None:
    import subprocess

    cluster = LocalCluster(tmp_path / "c x", nodes="node[1-3]", separate_hosts=True, site_firewall=True)
    conf = render_slurm_conf(cluster).splitlines()
    assert [line for line in conf if line.startswith(("Prolog", "Epilog"))] == [
        f"Prolog={tmp_path}/c x/site-prolog.sh", f"Epilog={tmp_path}/c x/site-epilog.sh", "PrologFlags=Alloc"]
    assert "Prolog" not in render_slurm_conf(LocalCluster(tmp_path, separate_hosts=True))
    # The wrapper runs the kit with the python given, quoted: a path with a space and a quote reaches it whole.
    python = tmp_path / "it's here" / "python"
    python.parent.mkdir()
    python.write_text('#!/bin/sh\nprintf "%s|" "$0" "$@"\n')
    python.chmod(0o755)
    script = cluster.site_script("epilog")
    script.parent.mkdir()
    script.write_text(render_site_script(cluster, "epilog", str(python)))
    ran = subprocess.run(["sh", str(script)], capture_output=True, text=True, check=True)
    assert ran.stdout == (f"{python}|-m|hpc_train|site|firewall|--epilog|--log|"
                          f"{tmp_path}/c x/log/site-firewall.log|")


def test_the_site_firewall_needs_separate_hosts() -> None:
    with pytest.raises(HpcTrainError, match="--site-firewall needs --separate-hosts"):
        LocalCluster(site_firewall=True)


def test_a_sites_job_submit_lua_is_slurms_plugin_and_a_missing_one_is_refused(tmp_path: Path) -> None:
    policy = tmp_path / "policy.lua"
    policy.write_text("function slurm_job_submit(d, p, u) return slurm.SUCCESS end\n")
    cluster = LocalCluster(tmp_path / "c", job_submit_lua=policy)
    assert "JobSubmitPlugins=lua" in render_slurm_conf(cluster).splitlines()
    assert cluster.lua_conf == tmp_path / "c" / "job_submit.lua"  # where the plugin reads it: beside slurm.conf
    assert "JobSubmitPlugins" not in render_slurm_conf(LocalCluster(tmp_path / "c"))
    with pytest.raises(HpcTrainError, match=r"^--job-submit-lua .*nothere\.lua: no such file \(or not a file\); give a site's "):
        LocalCluster(job_submit_lua=tmp_path / "nothere.lua")
