"""Separate hosts for a local cluster: every node a network namespace with its own address on a bridge.

On one machine all slurmd "nodes" normally share one network stack, so a task
that talks to `localhost` instead of its peer's host still works, and two tasks
on two "nodes" cannot use the same port. With separate hosts each node's slurmd
(and so every task it starts) runs in its own namespace, reached only through
its address on a private bridge, as on a real cluster.

The plan (names, addresses) and the `ip` commands that make and unmake it are
pure; `ensure`, `remove` and `run_ip` at the end are the only side effects.
Addresses: 10.250.N.0/24 with N = controller port mod 256, the bridge .1 (this
machine, where slurmctld runs), node i .(i+2). The namespaces have no default
route: they reach each other and the bridge address, nothing else; no IPv6
link-local addresses either (addrgenmode none), so nothing else is sent.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpc_train.errors import HpcTrainError

SUBNET_PREFIX = "10.250"
PREFIX_LENGTH = 24
MAX_HOSTS = 253  # .2 to .254
NAMESPACE_DIR = Path("/run/netns")
HOSTS_FILE = Path("/etc/hosts")
RECORD_NAME = "network.json"  # in the cluster's directory: what `up` made, for `down`


@dataclass(frozen=True)
class Host:
    """One node as a host: its namespace, the host side of its veth pair, and its address."""

    node: str
    namespace: str
    veth: str
    address: str


@dataclass(frozen=True)
class NetworkPlan:
    """A bridge on this machine and one namespace per node, linked to it by a veth pair."""

    bridge: str
    bridge_address: str
    hosts: tuple[Host, ...]

    @property
    def subnet(self) -> str:
        return f"{self.bridge_address.rsplit('.', 1)[0]}.0/{PREFIX_LENGTH}"

    def host(self, node: str) -> Host:
        for host in self.hosts:
            if host.node == node:
                return host
        raise HpcTrainError(f"node {node!r} is not one of this cluster's hosts "
                            f"({', '.join(h.node for h in self.hosts)}); pass the same --nodes as to up")

    def to_json(self) -> str:
        return json.dumps({"bridge": self.bridge, "bridge_address": self.bridge_address,
                           "hosts": [vars(host) for host in self.hosts]}, indent=1)

    @classmethod
    def from_json(cls, text: str) -> NetworkPlan:
        data = json.loads(text)
        return cls(data["bridge"], data["bridge_address"], tuple(Host(**host) for host in data["hosts"]))


def plan_network(controller_port: int, node_names: Sequence[str]) -> NetworkPlan:
    """Names and addresses for a cluster, from its controller port (unique per cluster) and node names."""
    if len(node_names) > MAX_HOSTS:
        raise HpcTrainError(f"--separate-hosts: {len(node_names)} nodes do not fit one /24 bridge subnet; "
                            f"ask for at most {MAX_HOSTS} nodes")
    net = f"{SUBNET_PREFIX}.{controller_port % 256}"
    # Interface names have at most 15 characters: "hts65535" and "hts65535n252" fit.
    hosts = tuple(Host(node=name, namespace=f"hpc-train-{controller_port}-{name}", veth=f"hts{controller_port}n{i}",
                       address=f"{net}.{i + 2}") for i, name in enumerate(node_names))
    return NetworkPlan(bridge=f"hts{controller_port}", bridge_address=f"{net}.1", hosts=hosts)


def create_commands(plan: NetworkPlan, links: Iterable[str], namespaces: Iterable[str]) -> list[list[str]]:
    """The `ip` commands that make what of `plan` is missing, given the links and namespaces there are."""
    links, namespaces = set(links), set(namespaces)
    commands: list[list[str]] = []
    if plan.bridge not in links:
        commands += [["ip", "link", "add", plan.bridge, "type", "bridge"],
                     ["ip", "addr", "add", f"{plan.bridge_address}/{PREFIX_LENGTH}", "dev", plan.bridge],
                     ["ip", "link", "set", plan.bridge, "addrgenmode", "none"],
                     ["ip", "link", "set", plan.bridge, "up"]]
    for host in plan.hosts:
        if host.namespace in namespaces and host.veth in links:
            continue  # made by an earlier `up`, and slurmd may be running in it
        if host.veth in links:
            commands.append(["ip", "link", "del", host.veth])
        if host.namespace in namespaces:
            commands.append(["ip", "netns", "del", host.namespace])
        ns = ["ip", "-n", host.namespace]
        commands += [["ip", "netns", "add", host.namespace],
                     ["ip", "link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.namespace],
                     ["ip", "link", "set", host.veth, "master", plan.bridge],
                     ["ip", "link", "set", host.veth, "addrgenmode", "none"],
                     ["ip", "link", "set", host.veth, "up"],
                     [*ns, "link", "set", "lo", "up"],
                     [*ns, "addr", "add", f"{host.address}/{PREFIX_LENGTH}", "dev", "eth0"],
                     [*ns, "link", "set", "eth0", "addrgenmode", "none"],
                     [*ns, "link", "set", "eth0", "up"]]
    return commands


def remove_commands(plan: NetworkPlan, links: Iterable[str], namespaces: Iterable[str]) -> list[list[str]]:
    """The `ip` commands that remove what of `plan` is there: namespaces, veth pairs, then the bridge."""
    links, namespaces = set(links), set(namespaces)
    commands = [["ip", "netns", "del", host.namespace] for host in plan.hosts if host.namespace in namespaces]
    # A namespace a leftover process still holds outlives `ip netns del`, and its veth pair with it: delete the pair.
    commands += [["ip", "link", "del", host.veth] for host in plan.hosts if host.veth in links]
    if plan.bridge in links:
        commands.append(["ip", "link", "del", plan.bridge])
    return commands


def enter_command(host: Host, command: Sequence[str]) -> list[str]:
    """`command` run in the host's network namespace only (files, mounts and processes stay shared)."""
    return ["nsenter", f"--net={NAMESPACE_DIR / host.namespace}", "--", *command]


def hosts_lines(plan: NetworkPlan, mark: str) -> list[str]:
    """/etc/hosts lines that make each node name resolve to its own address, each ending with `mark`."""
    return [f"{host.address} {host.node} {mark}" for host in plan.hosts]


def name_conflicts(hosts_text: str, plan: NetworkPlan, own_mark: str) -> list[str]:
    """Lines of a hosts file that give a node of `plan` another address (another cluster's, say): it would win.
    Lines ending with `own_mark` are the cluster's own (written for other options): `up` rewrites them."""
    wanted = {host.node: host.address for host in plan.hosts}
    conflicts = []
    for line in hosts_text.splitlines():
        if line.endswith(own_mark):
            continue
        fields = line.split("#", 1)[0].split()
        if any(wanted.get(name, fields[0]) != fields[0] for name in fields[1:]):
            conflicts.append(line.strip())
    return conflicts


# ---- side effects -------------------------------------------------------------------------------------------------

def refuse_conflicts(plan: NetworkPlan, own_mark: str) -> None:
    """One line, before anything is stopped or made, when another subnet or hosts line stands in the way."""
    _refuse_taken_subnet(plan)
    _refuse_taken_names(plan, own_mark)


def ensure(plan: NetworkPlan, directory: Path) -> None:
    """Make the bridge, namespaces and links that are missing, and record them in `directory` for `remove`."""
    links, namespaces = existing()
    (directory / RECORD_NAME).write_text(plan.to_json() + "\n")
    for command in create_commands(plan, links, namespaces):
        run_ip(command, f"set up the namespaces of {plan.subnet}")


def remove(plan: NetworkPlan, directory: Path) -> None:
    """Remove what `ensure` made: the recorded plan's and `plan`'s namespaces, links and bridge."""
    record = directory / RECORD_NAME
    plans = [plan]
    if record.exists():
        try:
            plans.insert(0, NetworkPlan.from_json(record.read_text()))
        except (ValueError, KeyError, TypeError):
            pass  # a damaged record: `plan` is what the same options made
    for each in plans:
        links, namespaces = existing()
        for command in remove_commands(each, links, namespaces):
            try:
                run_ip(command, f"remove the namespaces of {each.subnet}")
            except HpcTrainError:
                # A veth pair goes with its namespace, a moment after `ip netns del`: gone is what we wanted.
                if not (command[:3] == ["ip", "link", "del"] and command[3] not in existing()[0]):
                    raise
    record.unlink(missing_ok=True)


def recorded(directory: Path) -> bool:
    """Whether `ensure` made namespaces for the cluster in `directory` that `remove` has not removed yet."""
    return (directory / RECORD_NAME).exists()


def existing() -> tuple[set[str], set[str]]:
    """The names of this machine's links and network namespaces."""
    shown = run_ip(["ip", "-o", "link", "show"], "list the links")
    links = {line.split(":")[1].strip().split("@")[0] for line in shown.splitlines() if line.count(":") >= 2}
    namespaces = {path.name for path in NAMESPACE_DIR.iterdir()} if NAMESPACE_DIR.is_dir() else set()
    return links, namespaces


def _refuse_taken_subnet(plan: NetworkPlan) -> None:
    shown = run_ip(["ip", "-o", "-4", "addr", "show", "to", plan.subnet], "list the addresses")
    others = sorted({line.split()[1] for line in shown.splitlines() if line.split()[1] != plan.bridge})
    if others:
        raise HpcTrainError(f"--separate-hosts: subnet {plan.subnet} is already used here by {', '.join(others)}; "
                            "pick another --port (the subnet is 10.250.<port mod 256>.0/24)")


def _refuse_taken_names(plan: NetworkPlan, own_mark: str) -> None:
    conflicts = name_conflicts(HOSTS_FILE.read_text(), plan, own_mark) if HOSTS_FILE.exists() else []
    if conflicts:
        raise HpcTrainError(f"--separate-hosts: {HOSTS_FILE} already gives a node of this cluster another address "
                            f"({conflicts[0]!r}); bring that cluster down, or name these nodes otherwise (--nodes)")


def run_ip(command: list[str], purpose: str) -> str:
    try:
        result = subprocess.run(command, capture_output=True, text=True)
    except OSError as error:  # no iproute2 here
        result = subprocess.CompletedProcess(command, 1, "", error.strerror or str(error))
    if result.returncode != 0:
        detail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise HpcTrainError(f"could not {purpose}: {' '.join(command)} failed ({detail}); "
                            "separate hosts need root and iproute2 (ip netns, bridge, veth)")
    return result.stdout
