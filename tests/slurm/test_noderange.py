"""A node range (--nodes MIN-MAX): read, said, and the fewest nodes a retry may run on."""

from __future__ import annotations

import pytest

from hpc_train.errors import HpcTrainError
from hpc_train.slurm.noderange import (NodeRange, attempt_nodes, local_size, nodes_needed, parse_nodes, size_field,
                                       size_words)


@pytest.mark.parametrize("text, expected", [("4", NodeRange(4, 4)), (4, NodeRange(4, 4)), ("2-4", NodeRange(2, 4)),
                                            (" 2 - 3 ", NodeRange(2, 3)), ("3-3", NodeRange(3, 3))])
def test_a_number_or_a_range_is_read(text: object, expected: NodeRange) -> None:
    assert parse_nodes(text) == expected
    assert str(parse_nodes(text)) == (str(expected.most) if expected.fixed else f"{expected.least}-{expected.most}")


@pytest.mark.parametrize("text, said", [("4-2", "--nodes 4-2: MIN 4 is more than MAX 2; write the range as 2-4"),
                                        ("0-2", "--nodes 0-2: a job needs at least 1 node"),
                                        ("0", "--nodes 0: a job needs at least 1 node"),
                                        ("two", "--nodes 'two': expected a number of nodes (4) or a range MIN-MAX"),
                                        ("2-", "expected a number of nodes"), (True, "expected a number of nodes")])
def test_a_bad_range_is_one_line(text: object, said: str) -> None:
    with pytest.raises(HpcTrainError) as error:
        parse_nodes(text)
    assert said in str(error.value) and "\n" not in str(error.value)


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


def test_a_local_run_takes_what_this_machines_cpus_hold_within_the_range() -> None:
    assert local_size(NodeRange(2, 4), 1, 8) == 4
    assert local_size(NodeRange(2, 4), 2, 6) == 3
    assert local_size(NodeRange(2, 4), 4, 2) == 2  # MIN always (submit refuses a MIN beyond this machine)
