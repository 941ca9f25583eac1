"""The site firewall's pure core: the ruleset of a job, the tables that are ours, the ones a sweep removes."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.bootstrap.ports import assign_ports
from hpc_train.errors import HpcTrainError
from hpc_train.site.firewall import JobOnNode, job_window, our_tables, ruleset, stale_tables

LISTED = """table ip filter
table inet hpc_train_job_40
table inet firewalld
table ip hpc_train_job_41
table inet hpc_train_job_42x
table inet hpc_train_job_43
table inet my_hpc_train_job_44
"""


def test_the_ruleset_opens_the_window_to_the_jobs_addresses_and_loopback_only() -> None:
    text = ruleset("1234", range(26256, 26264), ["10.0.0.3", "fd00::2", "10.0.0.2", "10.0.0.3"])
    assert text == (
        "table inet hpc_train_job_1234\n"
        "delete table inet hpc_train_job_1234\n"
        "table inet hpc_train_job_1234 {\n"
        "\tchain input {\n"
        "\t\ttype filter hook input priority -10; policy accept;\n"
        '\t\tiif "lo" accept\n'
        "\t\ttcp dport 26256-26263 ip saddr { 10.0.0.2, 10.0.0.3 } accept\n"
        "\t\ttcp dport 26256-26263 ip6 saddr { fd00::2 } accept\n"
        "\t\ttcp dport 26256-26263 drop\n"
        "\t}\n"
        "}\n")


def test_a_ruleset_without_ipv6_addresses_has_no_empty_set() -> None:
    text = ruleset("7", range(16440, 16448), ["10.0.0.2"])
    assert "ip6" not in text and "{ }" not in text and "tcp dport 16440-16447 drop" in text


def test_the_window_is_the_bootstraps() -> None:
    for job_id, tasks, nodes in ((1234, 2, 2), (99, 16, 4), (5, 300, 60), (10**9 + 7, 200, 200)):
        per_node = -(-tasks // nodes)
        local = [index % per_node for index in range(tasks)]
        window = job_window(str(job_id), tasks, nodes)
        assert set(assign_ports(local, job_id=job_id).ports) <= set(window), (job_id, tasks)
    assert job_window("1234", None, 2) == range(26256, 26264)  # unknown task count: one per node


def test_only_our_tables_are_ours() -> None:
    assert our_tables(LISTED) == ["40", "43"]


def test_the_sweep_removes_tables_of_jobs_gone_from_this_node_only() -> None:
    assert stale_tables(["40", "43", "50"], ["43", "44"], "50") == ["40"]
    assert stale_tables(["40", "43"], None, "50") == []  # Slurm silent: nothing is known to have ended
    assert stale_tables([], ["1"], "2") == []


def test_the_jobs_environment_is_read_and_refused_in_one_line() -> None:
    job = JobOnNode.from_environ({"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "node[1-2]",
                                  "SLURMD_NODENAME": "node2"})
    assert job == JobOnNode("42", ("node1", "node2"), "node2")
    assert JobOnNode.from_environ({"SLURM_JOBID": "7", "SLURM_NODELIST": "a"}).nodes == ("a",)
    with pytest.raises(HpcTrainError, match="SLURM_JOB_ID='1; reboot': not a job id"):
        JobOnNode.from_environ({"SLURM_JOB_ID": "1; reboot", "SLURM_JOB_NODELIST": "a"})
    with pytest.raises(HpcTrainError, match="SLURM_NODELIST"):
        JobOnNode.from_environ({"SLURM_JOB_ID": "1"})


@pytest.mark.parametrize("nodes, per_node, workers", [(2, 1, 2), (8, 1, 2), (4, 4, 3), (2, 8, 5), (16, 1, 1)])
def test_the_kits_window_holds_every_port_a_served_job_uses(nodes: int, per_node: int, workers: int,
                                                            tmp_path: Path) -> None:
    """What the rendered script tells Slurm (its comment), the kit's window from it; the ports the job body gives
    its data service, and each rank's, from the environment the body gives the step: all one window."""
    from hpc_train.bootstrap import compute_layout
    from hpc_train.injob.dataservice import plan_ports, window_environ
    from hpc_train.injob.jobline import JobBody
    from hpc_train.spec.directives import directives
    from hpc_train.spec.request import JobRequest
    from hpc_train.spec.data_service import DataService
    from tests.fake_slurm import step_env

    service = DataService(workers)
    request = JobRequest.one_group(nodes, gpus_per_node=per_node, data_service=service)
    comment = directives(request)["comment"]
    tasks, job_id = nodes * per_node, 5000 + nodes * per_node
    window = job_window(str(job_id), tasks, nodes, str(comment))
    body = JobBody(tmp_path, nodes=nodes, tasks_per_node=per_node, data_service=service)
    env = {"SLURM_JOB_ID": str(job_id), "SLURM_NTASKS": str(tasks), "SLURM_JOB_NUM_NODES": str(nodes),
           "SLURM_JOB_NODELIST": f"node[1-{nodes}]", "SLURMD_NODENAME": "node1"}
    served = plan_ports(body, env)
    hosts = [f"node{1 + rank // per_node}" for rank in range(tasks)]
    step = step_env(f"node[1-{nodes}]", f"{per_node}(x{nodes})", 0, hosts_by_rank=hosts, job_id=job_id,
                    extra=window_environ(body))
    ranks = compute_layout(step).ports
    used = {served.dispatcher, *served.workers, *ranks}
    assert len(used) == tasks + 1 + workers and used <= set(window), (window, sorted(used))
    # Without the comment's word the kit guards the ranks' window alone, which misses the service's ports once the
    # ranks fill it (the word is what keeps them one).
    bare = job_window(str(job_id), tasks, nodes)
    assert bare == window if len(bare) >= tasks + 1 + workers else not used <= set(bare)
