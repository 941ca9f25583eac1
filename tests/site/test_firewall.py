"""The site firewall's pure core: the ruleset of a job, the tables that are ours, the ones a sweep removes."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.bootstrap.ports import assign_ports, derived_window
from hpc_train.errors import HpcTrainError
from hpc_train.site.firewall import Guarded, JobOnNode, guarded, job_window, our_tables, ruleset, stale_tables

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


# What Slurm 22.05 gave the prolog of real heterogeneous jobs (a local cluster with separate hosts, partitions gpu
# hf[1-2] and cpu hf3; `env` and `scontrol show job -o` dumped by the Prolog, as root): `service` is `hpc-train render
# --nodes 2 --ntasks-per-node 2 --data-workers 2 --data-partition cpu` (leader 7301013 on hf[1-2]: 4 ranks; the
# service's component 7301014 on hf3: 3 tasks), its batch shell's variables too; `three` a job of three components
# (7301005 hf1 2 tasks, 7301006 hf2 1, 7301007 hf3 1) with a service beside the ranks; `plain` a plain job (7301008).
CAPTURED = Path(__file__).parent / "slurm_22_05_het"


def captured_env(name: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in (CAPTURED / name).read_text().splitlines() if "=" in line)


def captured_records(name: str) -> list[dict[str, str]]:
    from hpc_train.slurm.client import fields
    return [fields(line) for line in (CAPTURED / name).read_text().splitlines() if line.strip()]


def test_a_components_prolog_sees_its_own_id_and_nodes_and_its_leaders_id() -> None:
    service = JobOnNode.from_environ(captured_env("service.component1.hf3.env"))
    assert service == JobOnNode("7301014", ("hf3",), "hf3", het_leader="7301013") and service.asked == "7301013"
    leader = JobOnNode.from_environ(captured_env("service.leader.hf2.env"))
    assert leader == JobOnNode("7301013", ("hf1", "hf2"), "hf2", het_leader="7301013")
    # Its epilog too: it removes the table its prolog named by the component's own id.
    assert JobOnNode.from_environ(captured_env("service.component1.hf3.epilog.env")).job_id == "7301014"
    plain = JobOnNode.from_environ(captured_env("plain.hf3.env"))
    assert plain == JobOnNode("7301008", ("hf3",), "hf3") and plain.asked == "7301008"
    with pytest.raises(HpcTrainError, match=r"^SLURM_HET_JOB_ID='7; reboot': not a job id; run it as Slurm's Prolog"):
        JobOnNode.from_environ({**captured_env("service.component1.hf3.env"), "SLURM_HET_JOB_ID": "7; reboot"})


def test_every_component_of_a_heterogeneous_job_guards_the_whole_jobs_window_for_all_its_nodes() -> None:
    shown = captured_records("service.scontrol")
    tables = {env: guarded(JobOnNode.from_environ(captured_env(env)), shown)
              for env in ("service.leader.hf1.env", "service.leader.hf2.env", "service.component1.hf3.env")}
    # The leader's id, the 4 ranks (the service's 3 tasks are no ranks: the comment names its component), 3 ports.
    whole = Guarded(derived_window(7301013, 4, 2, 3), ("hf1", "hf2", "hf3"), "7301013")
    assert set(tables.values()) == {whole} and len(whole.window) == 8
    # What the kit guarded before: each component its own id's window (the service's: no port of the job's).
    assert not set(job_window("7301014", 3, 1, shown[1]["Comment"])) & set(whole.window)
    # Had it counted the service's tasks as ranks, its window would be another (7 tasks + 3 ports: 16).
    assert derived_window(7301013, 7, 4, 3) != whole.window


def test_a_service_on_its_own_partition_listens_where_every_rank_and_the_kit_agree(tmp_path: Path) -> None:
    """The captured job's batch shell, as the job body reads it (ranks_view): the service's ports and each rank's
    (component 0's plain step, srun with the job's SLURM_HET_SIZE) are all in the window every table guards."""
    from hpc_train.bootstrap import compute_layout
    from hpc_train.injob.dataservice import plan_ports, window_environ
    from hpc_train.injob.servicecomponent import ranks_view, srun_environ
    from hpc_train.spec.data_service import DataService
    from hpc_train.spec.jobline import JobBody
    from tests.fake_slurm import step_env

    service = DataService(2, partition="cpu")
    body = JobBody(tmp_path, nodes=2, tasks_per_node=2, data_service=service)
    view = ranks_view(captured_env("service.batch.env"), service)
    served = plan_ports(body, view)
    hosts = ["hf1", "hf1", "hf2", "hf2"]
    ranks = compute_layout({**srun_environ(view), **step_env("hf[1-2]", "2(x2)", 0, hosts_by_rank=hosts,
                                                             job_id=7301013, extra=window_environ(body))}).ports
    window = guarded(JobOnNode.from_environ(captured_env("service.component1.hf3.env")),
                     captured_records("service.scontrol")).window
    used = {served.dispatcher, *served.workers, *ranks}
    assert len(used) == 4 + 1 + 2 and used <= set(window), (window, sorted(used))


def test_a_job_of_three_components_counts_every_components_tasks_as_ranks() -> None:
    """No component word: the service (if any) runs beside the ranks, whose step spans every component (the ps and
    chief on CPU nodes, the workers on GPU nodes: --ps-partition)."""
    job = JobOnNode.from_environ(captured_env("three.component1.hf2.env"))
    guard = guarded(job, captured_records("three.scontrol"))
    assert guard == Guarded(derived_window(7301005, 4, 2, 2), ("hf1", "hf2", "hf3"), "7301005")


def test_a_component_whose_leader_slurm_does_not_list_is_refused_in_one_line() -> None:
    """`scontrol show job` of a component's own id lists that component alone (captured): the prolog asks for the
    leader. Where Slurm lists not every component of the job (HetJobIdSet), nothing is guarded: the kit says why,
    and the job runs open, as without the kit."""
    job = JobOnNode.from_environ(captured_env("three.component1.hf2.env"))
    for shown in ([], captured_records("plain.scontrol"), captured_records("three.component1-only.scontrol"),
                  captured_records("three.scontrol")[:2]):
        with pytest.raises(HpcTrainError, match=r"^Slurm did not list the components of heterogeneous job 7301005 "
                                                r"\(scontrol show job 7301005\), and this component's nodes alone"):
            guarded(job, shown)
    assert [record["JobId"] for record in captured_records("three.component1-only.scontrol")] == ["7301006"]


def test_a_plain_jobs_guard_is_its_own_window_and_nodes() -> None:
    job = JobOnNode.from_environ(captured_env("plain.hf3.env"))
    assert guarded(job, captured_records("plain.scontrol")) == Guarded(job_window("7301008", 1, 1), ("hf3",))
    assert guarded(job, []) == Guarded(job_window("7301008", None, 1), ("hf3",))  # Slurm silent: one task a node
