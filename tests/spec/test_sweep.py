"""A sweep's elements, grid or random, and every bad sweep refused in one line before anything is queued."""

from __future__ import annotations

import pytest

from hpc_train.config import ConfigError, TrainConfig
from hpc_train.spec.sweep import (SweepError, check, from_yaml, grid, grid_axes, own_value, random_search, settings,
                                   substitute, table)


def test_a_grid_is_every_combination_typed_as_the_settings_are() -> None:
    sweep = grid(grid_axes(["learning_rate=0.01,1e-3", "batch_size=64,128"]))
    assert sweep.keys == ("learning_rate", "batch_size")
    assert list(sweep.elements) == [{"learning_rate": 0.01, "batch_size": 64}, {"learning_rate": 0.01, "batch_size": 128},
                                    {"learning_rate": 0.001, "batch_size": 64},
                                    {"learning_rate": 0.001, "batch_size": 128}]
    assert [config.batch_size for config in check(sweep, TrainConfig())] == [64, 128, 64, 128]
    assert table(sweep) == ["INDEX  learning_rate  batch_size", "0      0.01           64",
                            "1      0.01           128", "2      0.001          64", "3      0.001          128"]


def test_a_random_search_is_the_same_for_the_same_seed_and_within_its_space() -> None:
    space = {"learning_rate": "loguniform(1e-4, 1e-1)", "batch_size": "choice(64, 128)", "epochs": "randint(1, 3)"}
    first, again = random_search(space, 20, 7), random_search(space, 20, 7)
    assert first == again and first != random_search(space, 20, 8)
    assert all(1e-4 <= element["learning_rate"] <= 1e-1 and element["batch_size"] in (64, 128)
               and element["epochs"] in (1, 2, 3) for element in first.elements)
    assert len(check(first, TrainConfig())) == 20
    assert from_yaml({"random": {"trials": 20, "seed": 7, "space": space}}) == first
    assert from_yaml({"grid": {"seed": [1, 2]}}).elements == ({"seed": 1}, {"seed": 2})


@pytest.mark.parametrize("options, said", [
    (["lerning_rate=0.1"], "unknown key 'lerning_rate' in --sweep lerning_rate (did you mean 'learning_rate'?)"),
    (["batch_size=64,many"], "sweep element 1 (batch_size=many): batch_size: expected a whole number, got 'many'"),
    (["learning_rate=0.1,-1"], "sweep element 1 (learning_rate=-1): learning_rate: must be more than 0"),
    (["epochs="], "--sweep epochs=: no values"),
    (["epochs=1", "epochs=2"], "--sweep epochs: given twice"),
    (["epochs"], "--sweep 'epochs': expected KEY=V1,V2,..."),
])
def test_each_bad_sweep_is_one_line_naming_the_key(options: list[str], said: str) -> None:
    with pytest.raises(ConfigError) as refused:
        check(grid(grid_axes(options)), TrainConfig())
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_too_many_elements_bad_distributions_and_unknown_placeholders_are_refused() -> None:
    with pytest.raises(SweepError, match=r"has 6 elements, more than this site's MaxArraySize \(5\)"):
        check(grid(grid_axes(["seed=1,2,3,4,5,6"])), TrainConfig(), max_array_size=5)
    for space in ({"learning_rate": "loguniform(0, 1)"}, {"learning_rate": "normal(0, 1)"},
                  {"learning_rate": "uniform(2, 1)"}):
        with pytest.raises(SweepError):
            random_search(space, 3, 0)
    with pytest.raises(SweepError, match=r"uses \{lr\}, which no --sweep defines"):
        substitute(["python", "train.py", "--lr={lr}"], {"learning_rate": 0.1})
    assert substitute(["python", "train.py", "--lr={learning_rate}", "{seed}"], {"learning_rate": 1e-3, "seed": 2}) == [
        "python", "train.py", "--lr=0.001", "2"]


def test_a_commands_own_keys_are_typed_from_their_values_and_stay_out_of_its_configs() -> None:
    assert [own_value(text) for text in ("5", "-3", "0.25", "1e-3", "fast", "1,2")] == [5, -3, 0.25, 1e-3, "fast",
                                                                                      "1,2"]
    axes = grid_axes(["nap=5,75", "dropout=0.1,0.5", "mode=a,b", "seed=1"], own_keys=True)
    assert axes == {"nap": [5, 75], "dropout": [0.1, 0.5], "mode": ["a", "b"], "seed": [1]}
    sweep = grid(axes)
    configs = check(sweep, TrainConfig(), own_keys=True)
    assert len(configs) == 8 and all(config.seed == 1 for config in configs)
    assert settings(sweep.elements[0]) == {"seed": 1}
    assert from_yaml({"grid": {"nap": [5, 75]}}, own_keys=True).elements == ({"nap": 5}, {"nap": 75})
    with pytest.raises(ConfigError, match="unknown key 'nap' in --sweep nap; valid keys: strategy,"):
        grid_axes(["nap=5,75"])  # a trainer's sweep: its settings only
    with pytest.raises(ConfigError, match="unknown key 'nap'"):
        check(random_search({"nap": "randint(1, 9)"}, 2, 0), TrainConfig())
    assert len(check(random_search({"nap": "randint(1, 9)"}, 2, 0), TrainConfig(), own_keys=True)) == 2
