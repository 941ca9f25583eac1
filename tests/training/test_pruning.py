"""Pruning a sweep's hopeless elements through its Optuna study: successive halving at epochs 1, 2, 4, 8, ...
(against a journal file in tmp, then two real runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from hpc_train.runs import study
from hpc_train.training.pruning import reports, verdict


def asked(folder: Path, prune: str = "halving") -> Path:
    """A sweep element that asked its study (search.json as the array's script writes it)."""
    folder.mkdir(parents=True)
    (folder / study.SEARCH_FILE).write_text(json.dumps({"sampler": "grid", "space": {}, "keys": [], "prune": prune,
                                                        "epochs": 8, "minimize": False}))
    study.ask(folder, {})
    return folder


def test_halving_stops_the_worse_half_at_the_rungs_and_the_first_there_goes_on(tmp_path: Path) -> None:
    first, second, third = (asked(tmp_path / f"sw-12_{index}") for index in range(3))
    assert verdict(first, 1, 0.90) is False  # nobody to compare with
    assert verdict(second, 1, 0.95) is False  # the better half
    assert verdict(third, 1, 0.50) is True  # the worse half of three
    assert verdict(first, 2, 0.91) is False and verdict(second, 2, 0.80) is True  # rung 2: two got there
    assert verdict(first, 3, None) is False  # no figure: nothing to say
    assert (reports(first), reports(tmp_path / "single-run")) == (True, False)
    assert verdict(tmp_path / "single-run", 1, 0.1) is False


def test_median_waits_for_a_finished_trial(tmp_path: Path) -> None:
    first, second, third = (asked(tmp_path / f"sw-13_{index}", "median") for index in range(3))
    assert verdict(second, 1, 0.10) is False  # no trial finished yet
    assert verdict(first, 1, 0.90) is False and study.conclude(first, 0.95) == "COMPLETE"
    assert verdict(third, 1, 0.10) is True  # below the finished one's 0.90 at epoch 1


def test_a_study_error_on_the_chief_is_warned_of_once_and_the_element_trains_on_unpruned(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from types import SimpleNamespace

    from hpc_train.config import TrainConfig
    from hpc_train.training.trainer import _pruning_verdict

    folder = asked(tmp_path / "sw-14_0", "median")
    spec = json.loads((folder / study.SEARCH_FILE).read_text())
    # The study's database gone (its folder unreachable): SQLAlchemy's OperationalError at the report.
    (folder / study.SEARCH_FILE).write_text(json.dumps({**spec, "storage": f"sqlite:///{tmp_path}/gone/s.db"}))
    decide = _pruning_verdict(TrainConfig(prune="median"), SimpleNamespace(output=folder,
                                                                         rank=SimpleNamespace(is_chief=True)))
    # None: the chief's "go on", which the job's agreement hands every other rank.
    assert [decide(epoch, {"val_accuracy": 0.5}) for epoch in (1, 2, 3)] == [None, None, None]
    warned = capsys.readouterr().err.splitlines()
    assert len(warned) == 1 and "pruning is off for this run" in warned[0] and "OperationalError" in warned[0]


@pytest.mark.tensorflow
@pytest.mark.mock_twin("tests/e2e/test_sweeps.py::test_pruning_stops_the_element_that_learns_worse_and_the_report_"
                       "shows_where")
def test_an_element_that_learns_worse_prunes_itself_and_keeps_its_checkpoint(tmp_path: Path) -> None:
    from tests.training.runs import finish, start

    settings = ("epochs=2", "train_images=1024", "validation_images=512", "prune=halving")
    asked(tmp_path / "sw-7_0"), asked(tmp_path / "sw-7_1")  # (the array's trial step, before the ranks)
    [(code, _, err)] = finish([start(tmp_path / "sw-7_0", *settings, "learning_rate=0.002")])
    assert code == 0, err[-2000:]
    [(code, out, err)] = finish([start(tmp_path / "sw-7_1", *settings, "learning_rate=0.000001")])
    assert code == 0, err[-2000:]
    assert "hpc-train: pruned after epoch 1/2: val_accuracy" in out and "Optuna's halving pruner stops it" in out
    state = json.loads((tmp_path / "sw-7_1" / "state.json").read_text())
    assert (state["state"], state["epoch"]) == ("pruned", 1) and Path(state["checkpoint"] + ".index").is_file()
    assert [epoch["epoch"] for epoch in json.loads((tmp_path / "sw-7_1" / "metrics.json").read_text())["epochs"]] == [1]


@pytest.mark.tensorflow
def test_a_trainer_search_draws_each_elements_values_and_prunes_the_hopeless_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two elements of a rendered random search, run by the array's script as Slurm would start them (srun:
    hpc-train's mock srun, one task), one after the other: each draws its learning rate in the trial step; with
    --seed 0 the first draws 0.0084 and the second 1.2e-06, which the median pruner stops after epoch 1 (no Slurm)."""
    import os
    import subprocess
    import sys

    import optuna

    from hpc_train.runs import views
    from tests.cli.running import run_main
    from tests.fake_slurm import without_slurm
    from tests.login.test_script import fake_hpc_train
    from tests.mnist_data import shared_mnist

    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    bin_dir.mkdir()
    fake_hpc_train(bin_dir, f'exec {sys.executable} -m hpc_train "$@"\n')  # the real one for every verb
    # srun: hpc-train's own mock srun (`launch`), one task, the step's variables set as Slurm's srun sets them.
    (bin_dir / "srun").write_text(f'#!/bin/bash\nwhile [[ "$1" == -* ]]; do shift; done\n'
                                  f'exec {sys.executable} -m hpc_train launch --nodes 1 -- "$@"\n')
    (bin_dir / "srun").chmod(0o755)
    script = tmp_path / "search.sbatch"
    settings = ["epochs=2", "train_images=1024", "validation_images=512", f"data_dir={shared_mnist()}"]
    code, _, err = run_main(["render", "--nodes", "1", "--home", str(tmp_path), "-o", str(script), "--sweep",
                             "learning_rate=1e-6:1e-2:log", "--search", "random", "--trials", "2", "--seed", "0",
                             "--prune", "median",
                             *(word for setting in settings for word in ("--set", setting))], capsys)
    assert code == 0, err
    work.mkdir()
    for index in (0, 1):
        env = {**without_slurm(), "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": str(20 + index),
               "SLURM_ARRAY_JOB_ID": "10", "SLURM_ARRAY_TASK_ID": str(index), "SLURM_JOB_NAME": "sw",
               "SLURM_JOB_NODELIST": "127.0.0.1"}
        done = subprocess.run(["bash", str(script)], cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    elements = [work / "runs" / f"sw-10_{index}" for index in (0, 1)]
    drawn = [yaml.safe_load((folder / "config.yaml").read_text())["learning_rate"] for folder in elements]
    assert drawn[0] > 1e-3 > 1e-5 > drawn[1] >= 1e-6  # each element's own values, in its config
    found = optuna.load_study(study_name="sw-10", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(work / "runs" / "sw-10" / study.STUDY_FILE))))
    assert [(trial.state.name, trial.params["learning_rate"]) for trial in found.trials] == [
        ("COMPLETE", drawn[0]), ("PRUNED", drawn[1])]
    assert [views.shown_state("COMPLETED", views.read_run(folder)) for folder in elements] == ["completed", "pruned@1"]
