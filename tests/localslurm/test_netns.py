"""Separate hosts, pure: the plan of namespaces, addresses and links, its `ip` commands, slurm.conf and hosts lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.errors import HpcTrainError
from hpc_train.localslurm.netns import (NetworkPlan, create_commands, enter_command, name_conflicts, plan_network,
                                        remove_commands, run_ip)
from hpc_train.localslurm.spec import LocalCluster, hosts_line, render_slurm_conf

PLAN = plan_network(7617, ("host1", "host2"))


def test_each_node_gets_a_namespace_a_veth_and_an_address_on_the_clusters_own_subnet() -> None:
    assert (PLAN.bridge, PLAN.bridge_address, PLAN.subnet) == ("hts7617", "10.250.193.1", "10.250.193.0/24")
    assert [(h.node, h.namespace, h.veth, h.address) for h in PLAN.hosts] == [
        ("host1", "hpc-train-7617-host1", "hts7617n0", "10.250.193.2"),
        ("host2", "hpc-train-7617-host2", "hts7617n1", "10.250.193.3")]
    widest = plan_network(65000, tuple(f"n{i}" for i in range(253)))
    assert max(len(name) for h in widest.hosts for name in (h.veth, widest.bridge)) <= 15  # Linux's IFNAMSIZ - 1
    assert widest.hosts[-1].address == "10.250.232.254"
    assert NetworkPlan.from_json(PLAN.to_json()) == PLAN


def test_too_many_nodes_for_one_subnet_are_refused() -> None:
    with pytest.raises(HpcTrainError, match="254 nodes do not fit one /24 bridge subnet; ask for at most 253"):
        LocalCluster(nodes="n[1-254]", separate_hosts=True)
    LocalCluster(nodes="n[1-254]")  # without separate hosts the nodes share 127.0.0.1


def test_up_makes_only_what_is_missing_and_never_a_route_out() -> None:
    everything = create_commands(PLAN, links=(), namespaces=())
    assert everything[:4] == [["ip", "link", "add", "hts7617", "type", "bridge"],
                              ["ip", "addr", "add", "10.250.193.1/24", "dev", "hts7617"],
                              ["ip", "link", "set", "hts7617", "addrgenmode", "none"],  # no IPv6 link-local chatter
                              ["ip", "link", "set", "hts7617", "up"]]
    assert ["ip", "-n", "hpc-train-7617-host2", "addr", "add", "10.250.193.3/24", "dev", "eth0"] in everything
    assert ["ip", "-n", "hpc-train-7617-host1", "link", "set", "lo", "up"] in everything
    assert not [command for command in everything if "route" in command or "default" in command]
    made = {"hts7617", "hts7617n0", "hts7617n1"}, {"hpc-train-7617-host1", "hpc-train-7617-host2"}
    assert create_commands(PLAN, *made) == []  # a second up leaves running slurmds' namespaces alone
    # host2's namespace lost its link: made again from scratch, host1 untouched
    again = create_commands(PLAN, {"hts7617", "hts7617n0"}, made[1])
    assert again[0] == ["ip", "netns", "del", "hpc-train-7617-host2"] and all("host1" not in " ".join(c) for c in again)


def test_down_removes_what_is_there_namespaces_first() -> None:
    links = {"eth0", "hts7617", "hts7617n1"}
    assert remove_commands(PLAN, links, {"hpc-train-7617-host1", "other"}) == [
        ["ip", "netns", "del", "hpc-train-7617-host1"], ["ip", "link", "del", "hts7617n1"],
        ["ip", "link", "del", "hts7617"]]
    assert remove_commands(PLAN, {"eth0"}, {"other"}) == []


def test_slurmd_enters_only_its_nodes_network_namespace() -> None:
    assert enter_command(PLAN.hosts[1], ["slurmd", "-N", "host2"]) == [
        "nsenter", "--net=/run/netns/hpc-train-7617-host2", "--", "slurmd", "-N", "host2"]


def test_slurm_conf_and_hosts_with_separate_hosts() -> None:
    cluster = LocalCluster(Path("/tmp/x"), nodes="host[1-2]", cpus=4, controller_port=7617, separate_hosts=True)
    conf = render_slurm_conf(cluster)
    assert "SlurmctldHost=localhost(10.250.193.1)" in conf  # the namespaces reach slurmctld through the bridge
    # One slurmd port on every host, as on a real cluster.
    assert "NodeName=host1 NodeHostname=host1 NodeAddr=10.250.193.2 Port=7618 CPUs=4 Gres=gpu:2 State=UNKNOWN" in conf
    assert "NodeName=host2 NodeHostname=host2 NodeAddr=10.250.193.3 Port=7618 CPUs=4 Gres=gpu:2 State=UNKNOWN" in conf
    assert hosts_line(cluster).splitlines() == ["10.250.193.2 host1 # hpc-train local cluster /tmp/x",
                                                "10.250.193.3 host2 # hpc-train local cluster /tmp/x"]
    shared = render_slurm_conf(LocalCluster(Path("/tmp/x"), nodes="host[1-2]", cpus=4, controller_port=7617))
    assert "SlurmctldHost=localhost\n" in shared and "NodeAddr" not in shared


def test_a_node_name_another_line_of_etc_hosts_gives_another_address_is_found() -> None:
    hosts = "\n".join(["127.0.0.1 localhost", "# 10.0.0.9 host1", "", "127.0.0.1 node1 node2 # hpc-train local cluster /a",
                       "10.250.193.2 host1 # hpc-train local cluster /tmp/x",  # this cluster's own line
                       "127.0.0.1 host1 host2 # hpc-train local cluster /tmp/x",  # its own, from an up without
                       "10.250.205.2 host1 # hpc-train local cluster /tmp/y", "10.250.205.3 host2 other"])
    assert name_conflicts(hosts, PLAN, "# hpc-train local cluster /tmp/x") == [
        "10.250.205.2 host1 # hpc-train local cluster /tmp/y", "10.250.205.3 host2 other"]


def test_without_iproute2_separate_hosts_are_refused_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no `ip` here
    with pytest.raises(HpcTrainError, match=r"could not list the links: ip -o link show failed \(No such file or "
                                            r"directory\); separate hosts need root and iproute2"):
        run_ip(["ip", "-o", "link", "show"], "list the links")
