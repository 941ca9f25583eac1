"""Pruning a sweep's hopeless elements: successive halving at epochs 1, 2, 4, 8, ... (pure, then two real runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpc_train.training.pruning import in_worse_half, is_rung, siblings, verdict


def test_the_rungs_are_the_powers_of_two() -> None:
    assert [epoch for epoch in range(0, 20) if is_rung(epoch)] == [1, 2, 4, 8, 16]


def test_the_worse_half_of_those_that_reached_the_epoch_is_pruned_ties_kept() -> None:
    assert not in_worse_half(0.5, [], minimise=False)  # the first to get there goes on
    assert in_worse_half(0.5, [0.9], minimise=False) and not in_worse_half(0.9, [0.5], minimise=False)
    assert in_worse_half(0.7, [0.9, 0.8, 0.6], minimise=False)  # 3rd of 4
    assert not in_worse_half(0.8, [0.9, 0.7], minimise=False)  # 2nd of 3: the better half, rounded up
    assert in_worse_half(0.4, [0.1], minimise=True) and not in_worse_half(0.5, [0.5], minimise=True)


def write_epochs(folder: Path, values: list[float]) -> None:
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({"epochs": [
        {"epoch": epoch, "val_accuracy": value} for epoch, value in enumerate(values, 1)]}))


def test_an_element_is_compared_with_its_own_sweeps_elements_that_reached_the_epoch(tmp_path: Path) -> None:
    write_epochs(tmp_path / "sw-12_0", [0.90, 0.95])
    write_epochs(tmp_path / "sw-12_1", [0.80])
    write_epochs(tmp_path / "sw-13_0", [0.99])  # another sweep
    write_epochs(tmp_path / "other-12", [0.99])  # not an element
    own = tmp_path / "sw-12_2"
    own.mkdir()
    assert sorted(path.name for path in siblings(own)) == ["sw-12_0", "sw-12_1"]
    assert verdict(own, 1, "val_accuracy", 0.85) == (False, 3)  # 2nd of 3
    assert verdict(own, 2, "val_accuracy", 0.85) == (True, 2)  # only sw-12_0 got to epoch 2
    assert verdict(tmp_path / "single-run", 1, "val_accuracy", 0.1) == (False, 1)


@pytest.mark.tensorflow
def test_an_element_that_learns_worse_prunes_itself_and_keeps_its_checkpoint(tmp_path: Path) -> None:
    from tests.training.runs import finish, start

    settings = ("epochs=2", "train_images=1024", "validation_images=512", "prune=halving")
    [(code, _, err)] = finish([start(tmp_path / "sw-7_0", *settings, "learning_rate=0.002")])
    assert code == 0, err[-2000:]
    [(code, out, err)] = finish([start(tmp_path / "sw-7_1", *settings, "learning_rate=0.000001")])
    assert code == 0, err[-2000:]
    assert "hpc-train: pruned after epoch 1/2: val_accuracy" in out and "ranks in the worse half of the 2" in out
    state = json.loads((tmp_path / "sw-7_1" / "state.json").read_text())
    assert (state["state"], state["epoch"]) == ("pruned", 1) and Path(state["checkpoint"] + ".index").is_file()
    assert [epoch["epoch"] for epoch in json.loads((tmp_path / "sw-7_1" / "metrics.json").read_text())["epochs"]] == [1]
