"""The one rule for the objective: which figure a sweep is compared by, and which way is better."""

from __future__ import annotations

import pytest

from hpc_train.runs.objective import default_objective, direction, minimised, objective_name


def test_val_accuracy_where_the_runs_log_it_else_val_loss() -> None:
    assert default_objective(["loss", "val_loss", "val_accuracy"]) == "val_accuracy"
    assert default_objective({"loss": 0.3, "val_loss": 0.2}) == "val_loss"
    assert default_objective([]) == "val_loss"


def test_an_objective_asked_for_is_kept_whatever_the_runs_log() -> None:
    assert objective_name("val_auc", {"val_accuracy": 0.9}) == "val_auc"
    assert objective_name(None, {"val_accuracy": 0.9}) == "val_accuracy"
    assert objective_name("", {"val_loss": 0.1}) == "val_loss"


@pytest.mark.parametrize(("name", "lower_is_better"), [
    ("val_loss", True), ("loss", True), ("val_error", True), ("mean_squared_error", True),
    ("val_accuracy", False), ("val_auc", False), ("images_per_second", False)])
def test_a_loss_or_an_error_is_minimised_anything_else_maximised(name: str, lower_is_better: bool) -> None:
    assert minimised(name) is lower_is_better
    assert direction(name) == ("lowest" if lower_is_better else "highest")


def test_pruning_and_report_follow_the_same_rule() -> None:
    from hpc_train.config import TrainConfig
    from hpc_train.login.script import search_spec
    from hpc_train.spec.sweep import Sweep
    from hpc_train.runs import compare
    from hpc_train.training import pruning

    assert pruning.objective_name is objective_name
    # The study's direction (what the pruner and the sampler take as better) follows the same rule.
    sweep = Sweep(("seed",), ({"seed": 1},))
    assert [search_spec(TrainConfig(objective=name), sweep)["minimize"] for name in ("val_loss", None)] == [True, False]
    runs = [compare.Element(0, {}, "completed", [{"epoch": 1, "val_loss": 0.2, "val_error": 0.1}])]
    assert compare.default_objective(runs) == default_objective(["epoch", "val_loss", "val_error"]) == "val_loss"
