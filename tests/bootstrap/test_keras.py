"""What a command's tf.keras is under the multi-task strategies (pure), and what the rank line says of it."""

from __future__ import annotations

import pytest

from hpc_train.bootstrap.keras import VARIABLE, choose_keras, failure_hint, keras_problem, minor
from hpc_train.errors import HpcTrainError

MATCHING = {"tensorflow": "2.21.0", "tf-keras": "2.21.0", "keras": "3.15.1"}


def test_tf_keras_by_default_when_it_matches_tensorflow() -> None:
    choice = choose_keras("auto", {}, MATCHING)
    assert choice.variables == {VARIABLE: "1"} and choice.description == "tf-keras 2.21.0" and choice.problem is None
    assert choice.legacy


@pytest.mark.parametrize("value, which", [("0", "Keras 3.15.1"), ("1", "tf-keras 2.21.0")])
def test_the_users_own_variable_wins(value: str, which: str) -> None:
    choice = choose_keras("auto", {VARIABLE: value}, MATCHING)
    assert choice.variables == {} and choice.description == f"{which} ({VARIABLE}={value} as set)"


def test_keras_3_when_asked() -> None:
    choice = choose_keras("3", {}, MATCHING)
    assert choice.variables == {} and choice.description == "Keras 3.15.1 (--keras 3)" and not choice.legacy


@pytest.mark.parametrize("tf_keras, problem", [
    (None, "tf-keras is not installed, so tf.keras is Keras 3, which cannot run model.fit under "
           "MultiWorkerMirroredStrategy nor ParameterServerStrategy; pip install tf-keras~=2.21.0"),
    ("2.20.1", "tf-keras 2.20.1 does not match TensorFlow 2.21.0 (they must share a minor version); "
               "pip install tf-keras~=2.21.0"),
])
def test_tf_keras_missing_or_mismatched_is_one_line_with_the_fix(tf_keras: str | None, problem: str) -> None:
    versions = {**MATCHING, "tf-keras": tf_keras}
    assert keras_problem(versions) == problem
    choice = choose_keras("auto", {}, versions)
    assert choice.variables == {} and choice.problem == problem and choice.description == "Keras 3.15.1"
    with pytest.raises(HpcTrainError, match=r"^--keras 2: tf-keras"):
        choose_keras("2", {}, versions)


def test_without_tensorflow_there_is_nothing_to_choose_or_say() -> None:
    choice = choose_keras("auto", {}, {"tensorflow": None, "tf-keras": None, "keras": None})
    assert choice.variables == {} and choice.description == "" and choice.problem is None


def test_an_unknown_choice_is_refused() -> None:
    with pytest.raises(HpcTrainError, match="--keras 'legacy': expected one of auto, 2, 3"):
        choose_keras("legacy", {}, MATCHING)


def test_the_hint_names_the_failure_and_the_fix() -> None:
    hint = failure_hint(0, "Keras 3.15.1 (--keras 3)", "2.21.0")
    assert hint.startswith("hpc-train: hint: model.fit under MultiWorkerMirroredStrategy fails this way with Keras 3")
    assert "pip install tf-keras~=2.21.0" in hint and "\n" not in hint
    assert minor("2.21.0rc1") == "2.21"
