"""Separate hosts on a real Slurm: each node in its own network namespace, as on a real cluster.

One cluster for the module (host[3-4], /tmp/hpc-train-slurm-tests-hosts, port 7117, subnet
10.250.205.0/24), brought up with `separate_hosts=True`: the job scripts run across the namespaces
(TensorFlow's gRPC between hosts), a task that talks to 127.0.0.1 instead of its peer's host fails
as it would on a real cluster, and `down` leaves no namespace, link or hosts line behind.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpc_train.localslurm import control, netns
from hpc_train.localslurm.spec import HOSTS_MARK, LocalCluster
from tests.e2e.jobs import separate_hosts_impossible
from tests.fake_slurm import without_slurm
from tests.e2e.test_trainer_jobs import ROOT, Job, submit

pytestmark = pytest.mark.slurm_cluster
HOSTS_CLUSTER = LocalCluster(Path("/tmp/hpc-train-slurm-tests-hosts"), nodes="host[3-4]", cpus=4,
                             controller_port=7117, separate_hosts=True)
SMALL = ("--set", "epochs=1", "--set", "train_images=2000")
# Node names resolve through /etc/hosts, for every cluster on the machine: these stay clear of host[1-2], a
# separate-hosts cluster someone may have up by hand (`up` refuses a name another cluster gives another address).

# Rank 0 listens on its port; rank 1 reaches it by rank 0's node name, not on 127.0.0.1, and can
# listen on the very same port itself.
PROBE = """
import json, os, socket, time
config = json.loads(os.environ["TF_CONFIG"])
host, port = config["cluster"]["worker"][0].rsplit(":", 1)
port = int(port)
if config["task"]["index"] == 0:
    with socket.create_server(("", port)) as server:
        server.settimeout(60)
        while True:
            connection, _ = server.accept()
            with connection:
                connection.sendall(b"hello from rank 0")
                if connection.recv(10) == b"done":
                    break
else:
    def ask(address, last=b""):
        with socket.create_connection((address, port), timeout=5) as connection:
            answer = connection.recv(100).decode()
            connection.sendall(last)
            return answer
    deadline = time.monotonic() + 60
    while True:
        try:
            print(f"by name: {ask(host)}", flush=True)
            break
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    try:
        print(f"on 127.0.0.1: {ask('127.0.0.1')}", flush=True)
    except OSError as error:
        print(f"on 127.0.0.1: {type(error).__name__}", flush=True)
    with socket.create_server(("", port)):
        print(f"listening on port {port} here too", flush=True)
    print(f"by name again: {ask(host, b'done')}", flush=True)
"""


@pytest.fixture(scope="module")
def hosts_cluster() -> Iterator[LocalCluster]:
    reason = separate_hosts_impossible()
    if reason:
        pytest.skip(reason)
    was_running = all(control.status(HOSTS_CLUSTER).values())
    placed = control.placed(HOSTS_CLUSTER)  # 7117 or, when something else holds it, the next free ports
    control.up(placed)
    yield placed
    if not was_running:
        control.down(placed)


def made_by(cluster: LocalCluster) -> dict[str, list[str]]:
    """What of the cluster's namespaces, links and hosts lines exist on this machine now."""
    links, namespaces = netns.existing()
    plan = cluster.network
    mark = f"{HOSTS_MARK} {cluster.directory}"
    return {"namespaces": sorted(namespaces & {host.namespace for host in plan.hosts}),
            "links": sorted(links & {plan.bridge, *(host.veth for host in plan.hosts)}),
            "hosts lines": [line for line in Path("/etc/hosts").read_text().splitlines() if line.endswith(mark)]}


def test_each_slurmd_runs_in_its_own_namespace_at_its_own_address(hosts_cluster: LocalCluster) -> None:
    for host in hosts_cluster.network.hosts:
        pid = control.running_pid(hosts_cluster, f"slurmd-{host.node}")
        assert pid is not None
        identified = subprocess.run(["ip", "netns", "identify", str(pid)], capture_output=True, text=True)
        assert identified.stdout.strip() == host.namespace
    # The subnet follows the controller's port, which moves off a taken one (control.placed): read it from the plan.
    subnet = hosts_cluster.network.bridge_address.rsplit(".", 1)[0]
    assert subnet.startswith("10.250.")
    assert made_by(hosts_cluster)["hosts lines"] == [
        f"{subnet}.2 host3 {HOSTS_MARK} {hosts_cluster.directory}",
        f"{subnet}.3 host4 {HOSTS_MARK} {hosts_cluster.directory}"]


def test_a_task_reaches_its_peer_by_name_but_not_on_localhost(hosts_cluster: LocalCluster, tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(PROBE)
    env = {**without_slurm(), **control.slurm_env(hosts_cluster),
           "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    job_id = subprocess.run(
        ["sbatch", "--parsable", "-N2", "--ntasks-per-node=1", "-o", "slurm-probe-%j.out",
         "--wrap", "srun --label hpc-train bootstrap -- python probe.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout.strip()
    job = Job(job_id, tmp_path, env)
    assert job.wait() == ("COMPLETED", "0:0"), job.log()
    log = job.log()
    port = re.search(r"rank 0 is worker 0 at host3:(\d+)", log)
    assert port and "rank 1 is worker 1 at host4:" in log, log
    assert "1: by name: hello from rank 0" in log
    # On a one-stack cluster 127.0.0.1 would have reached rank 0, and the port would have been taken.
    assert "1: on 127.0.0.1: ConnectionRefusedError" in log
    assert f"1: listening on port {port.group(1)} here too" in log
    assert "1: by name again: hello from rank 0" in log


@pytest.mark.tensorflow
def test_mnist_ps_trains_across_hosts(hosts_cluster: LocalCluster, tmp_path: Path) -> None:
    job = submit(hosts_cluster, tmp_path, "mnist_ps.sh", *SMALL)
    assert job.wait() == ("COMPLETED", "0:0"), job.log()[-3000:]
    lines = job.task_lines()
    assert [re.sub(r":\d+, GPUs: .*", "", lines[rank]) for rank in range(4)] == [
        "rank 0 is chief 0 at host3", "rank 1 is ps 0 at host3", "rank 2 is worker 0 at host4",
        "rank 3 is worker 1 at host4"]
    assert job.run_state()["state"] == "finished"
    for role in ("[ps 0]", "[worker 0]", "[worker 1]"):
        assert f"{role} the chief at host3:" in job.log()


@pytest.mark.tensorflow
def test_a_2node_job_trains_across_hosts_and_a_requeue_resumes_it_to_the_end(hosts_cluster: LocalCluster, tmp_path: Path) -> None:
    job = submit(hosts_cluster, tmp_path, "mnist_2node.sh", "--set", "epochs=2")
    job.wait_for_log("epoch 1/2")
    job.wait_for_a_checkpoint()  # the test is of resuming: the requeue must find something to resume from
    job.scontrol("requeue")
    assert job.wait() == ("COMPLETED", "0:0"), job.log()[-3000:]
    log = job.log()
    assert "(restart 1)" in log and re.search(r"hpc-train: resuming (in|after) epoch", log), log[-3000:]
    assert [epoch["epoch"] for epoch in job.metrics()["epochs"]] == [1, 2]
    assert job.run_state()["state"] == "finished"
    # Both attempts trained across the two hosts, by name, as one cluster with one model.
    lines = job.task_lines()
    assert lines[0].startswith("rank 0 is worker 0 at host3:") and lines[1].startswith("rank 1 is worker 1 at host4:")
    assert "multiworker: 2 workers, 2 replica(s) in sync" in log
    digests = re.findall(r"^(\d): hpc-train \[worker \d\]: finished; weights digest (\w+)", log, re.M)
    assert len(digests) == 2 and digests[0][1] == digests[1][1], log[-3000:]


def test_down_removes_every_namespace_link_and_hosts_line() -> None:
    reason = separate_hosts_impossible()
    if reason:
        pytest.skip(reason)
    # 7127 or, when something else holds it, the next free ports
    cluster = control.placed(LocalCluster(Path("/tmp/hpc-train-slurm-tests-hosts-down"), nodes="host[5-6]", cpus=1,
                                          controller_port=7127, separate_hosts=True))
    port = cluster.controller_port
    options = ("--dir", str(cluster.directory), "--nodes", cluster.nodes, "--cpus", "1", "--port", str(port))
    command = [sys.executable, "-m", "hpc_train", "cluster"]
    try:
        subprocess.run([*command, "up", "--separate-hosts", *options], check=True, capture_output=True, timeout=120)
        assert made_by(cluster) == {
            "namespaces": [f"hpc-train-{port}-host5", f"hpc-train-{port}-host6"],
            "links": [f"hts{port}", f"hts{port}n0", f"hts{port}n1"],
            "hosts lines": [f"10.250.{port % 256}.{i + 2} host{i + 5} {HOSTS_MARK} {cluster.directory}"
                            for i in range(2)]}
    finally:
        # Without --separate-hosts: `down` finds what `up` made in the cluster's directory.
        down = subprocess.run([*command, "down", *options], capture_output=True, text=True, timeout=120)
    assert down.returncode == 0, down.stderr
    assert made_by(cluster) == {"namespaces": [], "links": [], "hosts lines": []}
    assert not any(control.status(cluster).values()) and not netns.recorded(cluster.directory)
