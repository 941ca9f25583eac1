"""Loading and calling a task module (no TensorFlow): what is refused, and how a user's error reads."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hpc_train.training.usertask import TaskError, UserCodeError, from_functions, is_file_spec, load_task

GOOD = """
def build_model():
    return "model"

def train_dataset(input_context, batch_size):
    return ("data", input_context, batch_size)
"""


def write(folder: Path, text: str, name: str = "task.py") -> str:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_a_file_task_is_imported_with_its_folder_on_the_path(tmp_path: Path) -> None:
    (tmp_path / "helper_for_task.py").write_text("SIZE = 3\n")
    task = load_task(write(tmp_path, "from helper_for_task import SIZE\n" + GOOD))
    assert task.call("train_dataset", "context", 4) == ("data", "context", 4)
    assert not task.has("validation_dataset")


def test_config_is_passed_only_to_functions_that_take_it(tmp_path: Path) -> None:
    task = load_task(write(tmp_path, GOOD + "\ndef validation_dataset(input_context, batch_size, config):\n"
                                            "    return config\n"))
    assert task.call("validation_dataset", None, 1, config="the config") == "the config"
    assert task.call("build_model", config="ignored") == "model"


@pytest.mark.parametrize("spec, expected", [("task.py", True), ("dir/task", True), ("my.tasks.mnist", False)])
def test_paths_and_dotted_names_are_told_apart(spec: str, expected: bool) -> None:
    assert is_file_spec(spec) is expected


def test_the_built_in_mnist_task_is_a_dotted_module_like_any_other() -> None:
    pytest.importorskip("tensorflow")
    task = load_task("hpc_train.tasks.mnist")
    assert all(task.has(name) for name in ("build_model", "train_dataset", "validation_dataset", "final_metrics"))
    assert task.accepts("train_dataset", "skip_batches")


@pytest.mark.parametrize("text, message", [
    ("def train_dataset(input_context, batch_size): pass\n",
     r"task .*task\.py defines no build_model\(\); a task module needs build_model\(\) and train_dataset"),
    ("build_model = 3\ndef train_dataset(input_context, batch_size): pass\n",
     r"build_model is a int, not a function; define build_model\(\)"),
    ("def build_model(): pass\ndef train_dataset(batch_size): pass\n",
     r"train_dataset\(batch_size\) cannot be called as train_dataset\(input_context, batch_size\)"),
    ("def build_model(: pass\n", r"syntax error at .*task\.py:1: .*; fix the file"),
])
def test_an_unusable_module_is_refused_in_one_line_naming_the_function(tmp_path: Path, text: str,
                                                                       message: str) -> None:
    with pytest.raises(TaskError, match=message) as caught:
        load_task(write(tmp_path, text))
    assert "\n" not in str(caught.value)


def test_missing_files_and_modules_say_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match=r"task .*nope\.py: no such file .*; give a FILE\.py path or a dotted"):
        load_task(str(tmp_path / "nope.py"))
    with pytest.raises(TaskError, match=r"no module named 'no_such_task_module' on the Python path"):
        load_task("no_such_task_module.sub")


def test_a_module_whose_import_raises_shows_only_the_users_frames(tmp_path: Path) -> None:
    spec = write(tmp_path, "import json\n\ndef load():\n    raise RuntimeError('no data in /scratch/me')\n\nload()\n")
    with pytest.raises(UserCodeError) as caught:
        load_task(spec)
    error = caught.value
    assert str(error).endswith("cannot be imported: importing it raised RuntimeError: no data in /scratch/me")
    assert error.exit_code == 2
    assert f'File "{spec}", line 6, in <module>' in error.details and "in load" in error.details
    assert "hpc_train" not in error.details and "importlib" not in error.details


def test_a_raising_user_function_keeps_its_message_and_frames(tmp_path: Path) -> None:
    task = load_task(write(tmp_path, GOOD + "\ndef validation_dataset(input_context, batch_size):\n"
                                            "    return {}['missing column']\n"))
    with pytest.raises(UserCodeError) as caught:
        task.call("validation_dataset", None, 8)
    assert str(caught.value) == f"task {tmp_path / 'task.py'}: validation_dataset() raised KeyError: 'missing column'"
    assert caught.value.exit_code == 1
    assert "line 9, in validation_dataset" in caught.value.details
    assert "usertask.py" not in caught.value.details


def test_functions_given_directly_are_checked_like_a_modules() -> None:
    with pytest.raises(TaskError, match=r"train_dataset\(\) cannot be called as train_dataset\(input_context, "):
        from_functions("fit", build_model=lambda: None, train_dataset=lambda: None)
    with pytest.raises(TaskError, match="unknown task function"):
        from_functions("fit", build_model=lambda: None, train_dataset=lambda c, b: None, build_dataset=print)


class Model:
    """Stands in for a tf_keras model: weights to copy, an optimizer and a loss once compiled."""

    def __init__(self, compiled: bool = True) -> None:
        self.optimizer = "adam" if compiled else None
        self.compiled_loss = "mse" if compiled else None
        self.weights = [0.0]

    def get_weights(self) -> list[float]:
        return self.weights

    def set_weights(self, weights: list[float]) -> None:
        self.weights = list(weights)


def test_build_model_must_return_a_compiled_model_of_the_class_asked_for() -> None:
    from hpc_train.training.usertask import checked_model

    task = from_functions("task t", build_model=Model, train_dataset=lambda input_context, batch_size: None)
    model = Model()
    assert checked_model(task, model, Model) is model
    with pytest.raises(TaskError, match=r"^task t: build_model\(\) returned a str, not a tf_keras model; build it "):
        checked_model(task, "model", Model)
    with pytest.raises(TaskError, match=r"^task t: build_model\(\) returned a model that is not compiled; call "):
        checked_model(task, Model(compiled=False), Model)


def test_a_summary_is_a_dict_metrics_json_can_hold() -> None:
    from hpc_train.training.usertask import task_summary

    def task_with(summary: object):  # type: ignore[no-untyped-def]
        return from_functions("task t", build_model=Model, train_dataset=lambda input_context, batch_size: None,
                              summary=lambda: summary)

    assert task_summary(task_with({"layers": [3, 4]}), None) == {"layers": [3, 4]}
    assert task_summary(from_functions("task t", build_model=Model,
                                       train_dataset=lambda input_context, batch_size: None), None) == {}
    with pytest.raises(TaskError, match=r"^task t: summary\(\) returned a list; return a dict of name -> value for "):
        task_summary(task_with([1]), None)
    with pytest.raises(TaskError, match=r"^task t: summary\(\) returned what metrics.json cannot hold \(Object of "):
        task_summary(task_with({"shape": object()}), None)


def test_final_figures_are_taken_of_a_copy_of_the_trained_model_as_numbers() -> None:
    from hpc_train.training.usertask import final_metrics

    seen: list[list[float]] = []

    def figures(model: Model) -> dict[str, object]:
        seen.append(model.get_weights())
        return {"final_mse": _Number(0.25), "final_count": 3}

    trained = Model()
    trained.weights = [1.5, 2.5]
    task = from_functions("task t", build_model=Model, train_dataset=lambda input_context, batch_size: None,
                          final_metrics=figures)
    final = final_metrics(task, trained, None)
    assert final == {"final_mse": 0.25, "final_count": 3} and type(final["final_mse"]) is float
    assert seen == [[1.5, 2.5]]
    words = from_functions("task t", build_model=Model, train_dataset=lambda input_context, batch_size: None,
                           final_metrics=lambda model: {"final_mse": "low"})
    with pytest.raises(TaskError, match=r"^task t: final_metrics\(model\) returned 'final_mse': a str, not a number"):
        final_metrics(words, trained, None)


class _Number:
    """Like numpy's scalars: not a float, but float() of it is one."""

    def __init__(self, value: float) -> None:
        self.value = value

    def __float__(self) -> float:
        return self.value
