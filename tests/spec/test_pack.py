"""A packed trial's share of the job's nodes (spec/pack.py)."""

from __future__ import annotations

import pytest

from hpc_train.spec.pack import Pack, PackError, Share, job_tasks_per_node, share_of, shares_in


@pytest.mark.parametrize("pack, group, share", [
    (Pack(), (2, 4, 1, False, None), Share(1, 1, 1, None, 4)),
    (Pack(trial_gpus=2), (2, 4, 1, True, 8), Share(1, 2, 1, 8, 2)),
    (Pack(trial_nodes=2), (4, 2, 1, False, None), Share(2, 2, 2, None, 1)),
    (Pack(trial_cpus=3), (2, 0, 4, False, None), Share(1, 0, 1, 3, 4)),
])
def test_a_share_is_the_trials_part_of_the_nodes(pack: Pack, group: tuple, share: Share) -> None:
    assert share_of(pack, *group) == share
    assert job_tasks_per_node(share) * group[0] >= share.tasks * share.nodes  # Slurm allocates every share's ranks


def test_how_many_trials_run_at_once() -> None:
    assert shares_in(Share(1, 1, 1, None, 4), 2) == 8 and shares_in(Share(2, 2, 2, None, 1), 5) == 2


def test_a_share_larger_than_a_node_is_refused() -> None:
    with pytest.raises(PackError, match="larger than a node"):
        share_of(Pack(trial_gpus=8), 1, 4, 1, False, None)
