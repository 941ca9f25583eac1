from __future__ import annotations

import pytest

from hpc_train.bootstrap.placement import Distribution, parse_distribution, place_tasks
from hpc_train.errors import SlurmEnvError


@pytest.mark.parametrize("value, expected", [
    (None, Distribution.BLOCK), ("", Distribution.BLOCK), ("block", Distribution.BLOCK),
    ("cyclic", Distribution.CYCLIC), ("block:cyclic", Distribution.BLOCK), ("cyclic:block", Distribution.CYCLIC),
    ("Cyclic:Cyclic,Pack", Distribution.CYCLIC), ("*:block", Distribution.BLOCK), ("unknown", Distribution.BLOCK),
])
def test_only_the_node_level_of_the_distribution_matters(value: str | None, expected: Distribution) -> None:
    assert parse_distribution("SLURM_DISTRIBUTION", value) is expected


@pytest.mark.parametrize("value", ["plane", "plane=4", "arbitrary", "fcyclic"])
def test_other_distributions_are_refused(value: str) -> None:
    with pytest.raises(SlurmEnvError, match="block and cyclic only"):
        parse_distribution("SLURM_DISTRIBUTION", value)


def test_block_and_cyclic_on_uneven_nodes() -> None:
    assert place_tasks([3, 1], Distribution.BLOCK) == ((0, 0, 0, 1), (0, 1, 2, 0))
    assert place_tasks([3, 1], Distribution.CYCLIC) == ((0, 1, 0, 0), (0, 0, 1, 2))
