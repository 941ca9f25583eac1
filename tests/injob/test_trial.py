"""The trial step of an element of a sweep on a named study (issue 36): a study in the database that optimizes the
other way is refused in one line, exit 1, and no trial is asked of it (no TensorFlow, no Slurm)."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from hpc_train.injob.trial import main
from hpc_train.runs import study
from tests.runs.test_shared_study import element


def test_a_named_study_that_optimizes_the_other_way_is_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    optuna.create_study(study_name="shared", storage=url, direction="minimize")
    assert study.existing_direction(url, "shared") == "minimize" and study.existing_direction(url, "new") is None
    folder = element(tmp_path, "a-11", 0, url, seed=5)
    assert main(["--run-dir", str(folder)]) == 1
    err = capsys.readouterr().err
    assert err.strip() == ("hpc-train: trial: study shared is to minimize its objective, this sweep's is to "
                           "maximize: submit it with another --study-name"), err
    assert not optuna.load_study(study_name="shared", storage=url).trials
    assert not (folder / study.TRIAL_FILE).exists()


def test_an_element_of_a_named_study_says_which_study_its_trial_is_in(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    folder = element(tmp_path, "a-11", 0, url, seed=5)
    assert main(["--run-dir", str(folder)]) == 0
    assert "hpc-train: trial 0 of study shared: learning_rate=" in capsys.readouterr().err
    assert "export HPC_TRAIN_SWEEP_LEARNING_RATE=" in (folder / "trial.sh").read_text()


def test_a_grid_elements_own_keys_are_the_choices_its_script_exported() -> None:
    """A command's grid with a study (pruning): a setting's value is in config.yaml, a key of the command's own
    (issue 46) only in HPC_TRAIN_SWEEP_<KEY>, matched back to its typed choice."""
    from hpc_train.injob.trial import grid_values
    from hpc_train.spec.sweep import SweepError

    space = {"nap": {"choices": [5, 75]}, "rate": {"choices": [0.5, 0.25]}, "seed": {"choices": [1, 2]}}
    values = grid_values({"seed": 2}, ["seed", "nap", "rate"], space,
                         {"HPC_TRAIN_SWEEP_NAP": "75", "HPC_TRAIN_SWEEP_RATE": "0.25"})
    assert values == {"seed": 2, "nap": 75, "rate": 0.25}
    with pytest.raises(SweepError, match="HPC_TRAIN_SWEEP_NAP=None is none of its values"):
        grid_values({}, ["nap"], space, {})
