"""A node range (--nodes MIN-MAX): read, and a --local run's size within it."""

from __future__ import annotations

import pytest

from hpc_train.errors import HpcTrainError
from hpc_train.spec.noderange import NodeRange, local_size, parse_nodes


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


def test_a_local_run_takes_what_this_machines_cpus_hold_within_the_range() -> None:
    assert local_size(NodeRange(2, 4), 1, 8) == 4
    assert local_size(NodeRange(2, 4), 2, 6) == 3
    assert local_size(NodeRange(2, 4), 4, 2) == 2  # MIN always (submit refuses a MIN beyond this machine)
