"""Properties over random steps: one cluster for all tasks, no port twice on a host, disjoint GPUs."""

from __future__ import annotations

from collections import Counter

import hostlist
from hypothesis import assume, given
from hypothesis import strategies as st

from hpc_train.bootstrap import BootstrapOptions, compute_layout
from hpc_train.bootstrap.placement import Distribution, place_tasks
from tests.fake_slurm import step_env


@st.composite
def steps(draw: st.DrawFn) -> tuple[list[str], list[int]]:
    """Distinct node names in a random order, and tasks per node."""
    prefixes = draw(st.lists(st.sampled_from(["node", "gpu", "c", "n-ib"]), min_size=1, max_size=3))
    numbers = draw(st.lists(st.integers(0, 120), min_size=1, max_size=10, unique=True))
    width = draw(st.integers(1, 3))
    names = list(dict.fromkeys(f"{prefixes[i % len(prefixes)]}{number:0{width}d}"
                               for i, number in enumerate(numbers)))
    counts = draw(st.lists(st.integers(1, 6), min_size=len(names), max_size=len(names)))
    return names, counts


def tasks_per_node_text(counts: list[int]) -> str:
    return ",".join(str(count) for count in counts)  # Slurm may also write 2(x3); both parse


options_strategy = st.builds(
    BootstrapOptions,
    strategy=st.sampled_from(["multiworker", "parameter_server"]),
    num_ps=st.integers(1, 3),
    port_base=st.none() | st.integers(1024, 40000),
)


@given(steps(), st.sampled_from(["block", "cyclic", None]), options_strategy, st.integers(1, 10**7),
       st.sampled_from([None, "0", "6", "12"]))
def test_all_tasks_agree_ports_differ_gpus_disjoint(step, distribution, options, job_id, gpus_on_node) -> None:
    names, counts = step
    num_tasks = sum(counts)
    # Layouts that are refused are tested elsewhere.
    assume(options.strategy.value != "parameter_server" or options.num_ps <= num_tasks - 2)
    assume(gpus_on_node is None or not max(counts) > int(gpus_on_node) > 0)
    # Slurm writes node lists compressed, in its own node order; use that form when it keeps our order.
    compressed = hostlist.collect_hostlist(names)
    nodelist = compressed if hostlist.expand_hostlist(compressed) == names else ",".join(names)
    extra = {} if gpus_on_node is None else {"SLURM_GPUS_ON_NODE": gpus_on_node}
    layouts = [compute_layout(step_env(nodelist, tasks_per_node_text(counts), rank, job_id=job_id,
                                       distribution=distribution, extra=extra), options)
               for rank in range(num_tasks)]

    first = layouts[0]
    for rank, layout in enumerate(layouts):
        assert layout.cluster() == first.cluster()
        assert layout.tasks == first.tasks
        assert layout.me.rank == rank

    tasks = first.tasks
    assert Counter(task.host for task in tasks) == Counter(dict(zip(names, counts)))
    ports_by_host = Counter((task.host, task.port) for task in tasks)
    assert max(ports_by_host.values()) == 1, "a port repeats on one host"
    if num_tasks <= 256:
        assert len({task.port for task in tasks}) == num_tasks, "ports repeat within the job"
    assert all(1024 <= task.port <= 65535 for task in tasks)

    for host in names:
        shares = [task.devices for task in tasks if task.host == host and task.devices]
        flat = [gpu for share in shares for gpu in share]
        assert len(flat) == len(set(flat)), f"GPUs shared on {host}"
    if options.strategy.value == "parameter_server":
        assert all(task.devices == () for task in tasks if task.role != "worker")
        roles = Counter(task.role for task in tasks)
        assert roles == {"chief": 1, "ps": options.num_ps, "worker": num_tasks - 1 - options.num_ps}


@given(st.lists(st.integers(1, 9), min_size=1, max_size=30), st.sampled_from(list(Distribution)))
def test_placement_fills_each_node_with_its_own_count(counts: list[int], distribution: Distribution) -> None:
    node_of_rank, local_of_rank = place_tasks(counts, distribution)
    assert len(node_of_rank) == sum(counts)
    for node, count in enumerate(counts):
        locals_here = [local for n, local in zip(node_of_rank, local_of_rank) if n == node]
        assert locals_here == list(range(count))  # local ids rise with the rank, as Slurm numbers them


@given(st.integers(1, 10**9), st.integers(1, 256), st.data())
def test_jobs_with_nearby_ids_never_share_a_port(job_a: int, tasks: int, data: st.DataObject) -> None:
    """Submissions close in time (ids less than 16384 / window apart) get disjoint windows."""
    window = max(8, 1 << (tasks - 1).bit_length())  # the documented window size
    job_b = job_a + data.draw(st.integers(1, 16384 // window - 1))
    a = compute_layout(step_env("node1", str(tasks), 0, job_id=job_a), BootstrapOptions())
    b = compute_layout(step_env("node1", str(tasks), 0, job_id=job_b), BootstrapOptions())
    assert not {t.port for t in a.tasks} & {t.port for t in b.tasks}
