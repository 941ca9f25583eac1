"""A study that sweeps share (--study-name, issue 36): each sweep's elements draw their own values with their own
seeds, claim and adopt only their own trials, ask at once without lock errors, and a study that optimizes the other
way is refused (tests/injob/test_trial.py; no TensorFlow, no Slurm)."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import optuna
import pytest

from hpc_train.injob.trial import prepare
from hpc_train.runs import study, trials

SPACE = {"learning_rate": {"low": 1e-4, "high": 1e-1, "log": True, "int": False}}


def element(runs: Path, sweep: str, index: int, url: str, seed: int, **spec: object) -> Path:
    """runs/SWEEP_INDEX with the search.json a sweep on the study "shared" writes."""
    folder = runs / f"{sweep}_{index}"
    folder.mkdir(parents=True)
    (folder / study.SEARCH_FILE).write_text(json.dumps(
        {"sampler": "random", "seed": seed, "space": SPACE, "keys": list(SPACE), "prune": "none", "epochs": 2,
         "objective": None, "minimize": False, "storage": url, "study": "shared", **spec}))
    (folder / "config.yaml").write_text("epochs: 2\nlearning_rate: 0.001\n")
    return folder


def test_two_sweeps_on_one_study_draw_apart_and_number_their_trials_in_turn(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    first = [element(tmp_path, "a-11", index, url, seed=5) for index in range(2)]
    second = [element(tmp_path, "b-12", index, url, seed=6) for index in range(2)]
    asked = [study.ask(folder) for folder in (*first, *second)]
    assert [kept["number"] for kept in asked] == [0, 1, 2, 3] and {kept["study"] for kept in asked} == {"shared"}
    rates = [kept["values"]["learning_rate"] for kept in asked]
    assert len(set(rates)) == 4, rates  # the same index in two sweeps: other seeds, other values
    shared = optuna.load_study(study_name="shared", storage=url)
    assert [(trial.user_attrs["sweep"], trial.user_attrs["element"]) for trial in shared.trials] == \
        [("a-11", 0), ("a-11", 1), ("b-12", 0), ("b-12", 1)]
    assert optuna.study.get_all_study_names(url) == ["shared"]  # no study of a sweep's own
    later = element(tmp_path, "c-13", 0, url, seed=7)
    assert study.ask(later)["number"] == 4  # a later sweep continues where the study stands


@pytest.mark.parametrize("sampler", ["random", "tpe"])
def test_a_second_sweep_given_the_seed_of_the_first_draws_new_trials(sampler: str, tmp_path: Path) -> None:
    """(issue 46, 5) two `--search tpe --trials 3 --study-name shared --seed 7` sweeps put 6 trials in the study
    but only 3 distinct values: the second drew the first's again."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    first = [element(tmp_path, "a-11", index, url, seed=7, sampler=sampler) for index in range(3)]
    second = [element(tmp_path, "b-12", index, url, seed=7, sampler=sampler) for index in range(3)]
    rates = [study.ask(folder)["values"]["learning_rate"] for folder in (*first, *second)]
    assert len(set(rates)) == 6, rates
    alone = [element(tmp_path / "alone", "c-13", index, f"sqlite:///{tmp_path / 't.db'}", seed=7, sampler=sampler)
             for index in range(3)]
    assert [study.ask(folder)["values"]["learning_rate"] for folder in alone] == rates[:3]  # a seed still repeats


def test_a_restarted_element_adopts_its_own_trial_not_another_sweeps_of_the_same_index(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    mine, theirs = element(tmp_path, "a-11", 0, url, seed=5), element(tmp_path, "b-12", 0, url, seed=6)
    study.ask(theirs)  # RUNNING, element 0 too: not this one's to adopt

    def killed(*_: object) -> None:
        raise KeyboardInterrupt("the node went down after the ask, before trial.json")

    monkeypatch.setattr(study, "write_json_atomically", killed)
    with pytest.raises(KeyboardInterrupt):
        study.ask(mine)
    monkeypatch.undo()
    again = study.ask(mine)
    shared = optuna.load_study(study_name="shared", storage=url)
    assert again["number"] == 1 and len(shared.trials) == 2 and shared.trials[1].params == again["values"]
    assert study.read_trial(theirs)["number"] == 0


def _ask_at(folder: Path, start: multiprocessing.synchronize.Barrier, told: multiprocessing.Queue) -> None:
    start.wait()
    try:
        kept = study.ask(folder)
        study.conclude(folder, kept["values"]["learning_rate"])
        told.put(kept["number"])
    except Exception as error:  # (what the element would print: the test shows it)
        told.put(f"{type(error).__name__}: {error}")


def test_the_elements_of_two_sweeps_ask_one_sqlite_study_at_once_without_lock_errors(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"  # a new database: the first to open it race to create its tables too
    folders = [element(tmp_path, sweep, index, url, seed=seed) for sweep, seed in (("a-11", 5), ("b-12", 6))
               for index in range(3)]
    context = multiprocessing.get_context("fork")
    start, told = context.Barrier(len(folders)), context.Queue()
    workers = [context.Process(target=_ask_at, args=(folder, start, told)) for folder in folders]
    for worker in workers:
        worker.start()
    numbers = [told.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
    assert sorted(numbers, key=str) == list(range(len(folders))), numbers
    shared = optuna.load_study(study_name="shared", storage=url)
    assert [trial.state.name for trial in shared.trials] == ["COMPLETE"] * len(folders)


def test_each_elements_seed_is_its_own_and_fits_numpys_generators() -> None:
    seeds = [study.element_seed(7, index) for index in range(5000)]
    assert len(set(seeds)) == 5000 and all(0 <= seed < 2**32 for seed in seeds)
    assert study.element_seed(7, 0) != study.element_seed(8, 0)


def test_the_report_of_a_shared_study_names_each_sweeps_elements_and_exports_another_sweeps_best(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    ours, theirs = element(tmp_path, "a-11", 0, url, seed=5), element(tmp_path, "b-12", 0, url, seed=6)
    for folder, value in ((ours, 0.5), (theirs, 0.9)):
        prepare(folder, None)  # (its drawn values into its config.yaml, as the trial step writes them)
        study.conclude(folder, value)
    assert trials.searched([ours])["seed"] == 5
    loaded = trials.load(tmp_path / "a-11", [ours])
    shown = trials.lines(loaded, seed=5)
    assert shown[0] == "study shared (maximize): 2 trials; this sweep's seed 5", shown
    assert shown[2].split()[:3] == ["1", "b-12_0", "COMPLETE"] and shown[3].split()[:2] == ["0", "a-11_0"]
    assert shown[-1].startswith("best trial: 1 (element b-12_0): 0.9000")
    assert trials.csv_text(loaded).splitlines()[1].startswith("1,b-12_0,COMPLETE,0.9,")
    settings = trials.export_best(loaded, lambda index: ours, tmp_path / "best.yaml")  # this sweep's element I
    assert settings["learning_rate"] == study.read_trial(theirs)["values"]["learning_rate"]
