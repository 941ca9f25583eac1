from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.config import ConfigError, TrainConfig, load_config

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"


def test_defaults_are_a_valid_single_process_run() -> None:
    config = load_config()
    assert (config.strategy, config.model, config.batch_size, config.epochs) == ("none", "cnn", 64, 5)


def test_file_then_overrides_in_order(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("strategy: multiworker\nepochs: 3\nlearning_rate: 1e-3\ndata_dir: /data/mnist\n")
    config = load_config(path, ["epochs=4", "steps_per_epoch=null", "output_dir=/out dir/x"])
    assert (config.strategy, config.epochs, config.learning_rate) == ("multiworker", 4, 0.001)
    assert (config.steps_per_epoch, config.data_dir, config.output_dir) == (None, "/data/mnist", "/out dir/x")


def test_text_settings_are_taken_as_given() -> None:
    config = load_config(None, ["output_dir=runs/x'; touch PWNED #-2", "data_dir=/d/1e-3", "strategy=none"])
    assert (config.output_dir, config.data_dir) == ("runs/x'; touch PWNED #-2", "/d/1e-3")
    assert load_config(None, ["data_dir=null"]).data_dir is None


@pytest.mark.parametrize("name", sorted(path.name for path in TEMPLATES.glob("mnist-*.yaml")))
def test_every_example_config_is_valid_and_names_its_strategy(name: str) -> None:
    config = load_config(TEMPLATES / name)
    assert name == f"mnist-{config.strategy}.yaml"


def test_there_is_an_example_per_strategy() -> None:
    assert {path.name for path in TEMPLATES.glob("mnist-*.yaml")} == {
        "mnist-none.yaml", "mnist-mirrored.yaml", "mnist-multiworker.yaml", "mnist-parameter_server.yaml"}


@pytest.mark.parametrize("overrides, message", [
    (["batch_size=-64"], "batch_size: must be 1 or more, got -64"),
    (["batch_size=0"], "batch_size: must be 1 or more, got 0"),
    (["batch_size=2.5"], "batch_size: expected a whole number, got 2.5"),
    (["epochs=true"], "epochs: expected a whole number, got True"),
    (["strategy=horovod"], "strategy: expected one of none, mirrored, multiworker, parameter_server, got 'horovod'"),
    (["learning_rate=fast"], "learning_rate: expected a number, got 'fast'"),
    (["learning_rate=0"], "learning_rate: must be more than 0, got 0"),
    (["steps_per_epoch=0"], "steps_per_epoch: must be 1 or more, got 0"),
    (["epochs=[1, 2]"], "epochs: expected a whole number, got [1, 2]"),
    (["epoch=3"], "unknown key 'epoch' in --set (did you mean 'epochs'?); valid keys: strategy, task, model,"),
    (["epochs"], "--set 'epochs': expected key=value, e.g. --set epochs=3"),
])
def test_bad_values_are_named_with_what_is_valid(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(None, overrides)
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("text, message", [
    ("epochs: [1\n", "not valid YAML at line 2, column 1"),
    ("- a\n- b\n", "expected 'key: value' lines at the top level, got a list"),
    ("epochz: 3\n", "unknown key 'epochz' in"),
])
def test_bad_files_say_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        load_config(path)


def test_an_empty_file_means_the_defaults(tmp_path: Path) -> None:
    (tmp_path / "empty.yaml").write_text("# nothing\n")
    assert load_config(tmp_path / "empty.yaml") == TrainConfig()


def test_a_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config '.*nope.yaml': No such file"):
        load_config(tmp_path / "nope.yaml")


def test_constructing_directly_is_validated_too() -> None:
    with pytest.raises(ConfigError, match="num_ps: must be 1 or more"):
        TrainConfig(num_ps=0)


def test_a_file_value_of_the_wrong_type_names_the_key(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("data_dir: [1, 2]\n")
    with pytest.raises(ConfigError, match=r"data_dir: expected text or empty \(null\), got \[1, 2\]"):
        load_config(tmp_path / "job.yaml")


def test_a_relative_task_file_is_found_from_the_yaml_file_or_the_current_folder(tmp_path, monkeypatch) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "config.yaml").write_text("task: my_task.py\n")
    monkeypatch.chdir(tmp_path)
    assert load_config("project/config.yaml").task == str(tmp_path / "project" / "my_task.py")
    assert load_config(None, ["task=other/t.py"]).task == str(tmp_path / "other" / "t.py")
    assert load_config(None, ["task=my_package.task"]).task == "my_package.task"  # a dotted module stays as given


def test_metrics_list_only_the_settings_that_apply_to_the_task() -> None:
    from hpc_train.config import BUILTIN_TASK_SETTINGS, applying_settings

    builtin = applying_settings(TrainConfig())
    assert all(name in builtin for name in BUILTIN_TASK_SETTINGS)
    mine = applying_settings(TrainConfig(task="my_task.py", epochs=3))
    assert not any(name in mine for name in BUILTIN_TASK_SETTINGS)
    assert mine["task"] == "my_task.py" and mine["epochs"] == 3 and mine["learning_rate"] == 0.001


def test_a_task_modules_default_output_is_named_after_it_and_an_explicit_one_wins(tmp_path: Path) -> None:
    """(issue 27, 3) A task module wrote to runs/mnist, and MNIST then tried to resume its checkpoints."""
    assert load_config(None).output_dir == "runs/mnist"
    assert load_config(None, ["task=myproject/task.py"]).output_dir == "runs/task"
    assert load_config(None, ["task=my_package.sequence"]).output_dir == "runs/sequence"
    assert load_config(None, ["task=myproject/task.py", "output_dir=elsewhere"]).output_dir == "elsewhere"
    (tmp_path / "config.yaml").write_text("task: model.py\n")
    assert load_config(tmp_path / "config.yaml").output_dir == "runs/model"
    (tmp_path / "config.yaml").write_text("task: model.py\noutput_dir: out\n")
    assert load_config(tmp_path / "config.yaml").output_dir == "out"
