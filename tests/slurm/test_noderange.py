"""A node range as the ranks' environment says it: the size said and read back, and the fewest nodes a retry may
run on."""

from __future__ import annotations

from hpc_train.slurm.noderange import attempt_nodes, nodes_needed, size_field
from hpc_train.spec.noderange import NodeRange, size_words


def test_the_size_is_said_and_read_back_from_the_ranks_environment() -> None:
    env = {"HPC_TRAIN_NODE_RANGE": "2-4", "HPC_TRAIN_NODES": "3"}
    assert size_words(3, NodeRange(2, 4)) == "on 3 of 2-4 nodes"
    assert attempt_nodes(env) == (3, NodeRange(2, 4))
    assert size_field(env) == {"nodes": "on 3 of 2-4 nodes"} and size_field({}) == {}
    assert attempt_nodes({"HPC_TRAIN_NODE_RANGE": "2-4"}) is None


def test_a_retry_may_run_on_min_nodes_and_a_fixed_job_on_as_many_as_it_had() -> None:
    assert nodes_needed({}, 4) == 4  # a fixed size: never below it (today's rule)
    assert nodes_needed({"HPC_TRAIN_NODE_RANGE": "2-4", "HPC_TRAIN_NODES": "3"}, 3) == 2
    # A heterogeneous job's chief and ps node stay: its attempt ran on 1 + 3 nodes, the workers' MIN is 2.
    assert nodes_needed({"HPC_TRAIN_NODE_RANGE": "2-4", "HPC_TRAIN_NODES": "3"}, 4) == 3
