"""A sweep's Optuna study in a journal file: elements ask once, report, are pruned, finish or fail, and the study
reads back through Optuna itself (no TensorFlow, no Slurm)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import optuna
import pytest
import yaml

from hpc_train.injob.trial import prepare
from hpc_train.runs import study, trials
from hpc_train.runs.metrics import write_metrics
from tests.cli.running import run_main

SPACE = {"learning_rate": {"low": 1e-4, "high": 1e-1, "log": True, "int": False},
         "batch_size": {"choices": [32, 64]}}


def element(runs: Path, index: int, **spec: object) -> Path:
    """runs/sw-7_INDEX with the script's search.json and base config.yaml."""
    folder = runs / f"sw-7_{index}"
    folder.mkdir(parents=True)
    (folder / study.SEARCH_FILE).write_text(json.dumps(
        {"sampler": "tpe", "seed": 0, "space": SPACE, "keys": list(SPACE), "prune": "halving", "epochs": 4,
         "objective": None, "minimize": False, "storage": None, **spec}))
    (folder / "config.yaml").write_text("epochs: 4\nlearning_rate: 0.001\nbatch_size: 16\n")
    return folder


def read_back(runs: Path) -> optuna.Study:
    return optuna.load_study(study_name="sw-7", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(runs / "sw-7" / study.STUDY_FILE))))


def test_each_element_asks_once_and_a_requeued_one_keeps_its_trial(tmp_path: Path) -> None:
    first, second = element(tmp_path, 0), element(tmp_path, 1)
    asked = [study.ask(first), study.ask(second)]
    assert [kept["number"] for kept in asked] == [0, 1] and asked[0]["values"] != asked[1]["values"]
    for kept in asked:
        assert 1e-4 <= kept["values"]["learning_rate"] <= 1e-1 and kept["values"]["batch_size"] in (32, 64)
    assert study.ask(first) == asked[0]  # read back from trial.json: no new trial
    assert len(read_back(tmp_path).trials) == 2 and (tmp_path / "sw-7" / "study.journal").is_file()


def test_halving_prunes_the_worse_element_at_an_epoch_and_the_study_learns_every_end(tmp_path: Path) -> None:
    runs = [element(tmp_path, index) for index in range(3)]
    for folder in runs:
        study.ask(folder)
    assert study.report(runs[0], 1, 0.90) is False  # the first to get there goes on
    assert study.report(runs[1], 1, 0.40) is True  # the worse half of two
    assert study.report(runs[1], 2, 0.95) is False  # pruned already: nothing more to say
    assert study.conclude(runs[0], 0.93) == "COMPLETE" and study.fail(runs[2]) == "FAIL"
    assert study.conclude(runs[0], 0.10) is None  # told once
    states = [(trial.state.name, trial.value) for trial in read_back(tmp_path).trials]
    assert states == [("COMPLETE", 0.93), ("PRUNED", 0.40), ("FAIL", None)]
    assert study.report(tmp_path / "not-a-sweep", 1, 0.5) is False


def test_settle_completes_with_the_last_epochs_objective_and_a_failed_job_fails(tmp_path: Path) -> None:
    done, failed, stopped = (element(tmp_path, index) for index in range(3))
    for folder in (done, failed, stopped):
        study.ask(folder)
    write_metrics(done, {"epochs": [{"epoch": 1, "val_accuracy": 0.8}, {"epoch": 2, "val_accuracy": 0.85}]})
    (stopped / "state.json").write_text(json.dumps({"state": "requeued"}))
    assert (study.settle(done, 0), study.settle(failed, 1), study.settle(stopped, 0)) == ("COMPLETE", "FAIL", None)
    assert [trial.state.name for trial in read_back(tmp_path).trials] == ["COMPLETE", "FAIL", "RUNNING"]


def test_the_trial_step_writes_the_values_into_config_and_a_command_with_hostile_values_stays_inert(
        tmp_path: Path) -> None:
    hostile = "x'; touch PWNED #"
    folder = element(tmp_path, 0, sampler="random", space={"data_dir": {"choices": [hostile]},
                                                         "epochs": {"low": 2, "high": 3, "log": False, "int": True}})
    kept = prepare(folder, "hpc-train supervise -- python t.py '--data={data_dir}' --epochs={epochs}")
    config = yaml.safe_load((folder / "config.yaml").read_text())
    assert config["data_dir"] == hostile and config["epochs"] == kept["values"]["epochs"] in (2, 3), config
    shown = subprocess.run(["bash", "-c", 'source trial.sh; printf "%s\\n" "${element_command[@]}"; '
                            'echo "$HPC_TRAIN_SWEEP_DATA_DIR"'], cwd=folder, capture_output=True, text=True)
    assert shown.stdout.splitlines()[-3:] == [f"--data={hostile}", f"--epochs={kept['values']['epochs']}", hostile]
    assert not (folder / "PWNED").exists()
    assert prepare(folder, None)["number"] == kept["number"]  # a requeue: the same trial


def test_grid_elements_register_their_own_values(tmp_path: Path) -> None:
    axes = {"learning_rate": {"choices": [0.01, 0.001]}}
    first, second = (element(tmp_path, index, sampler="grid", space=axes, keys=["learning_rate"]) for index in (0, 1))
    (first / "config.yaml").write_text("learning_rate: 0.01\n")
    assert prepare(first, None)["values"] == {"learning_rate": 0.01}
    assert prepare(second, None)["values"] == {"learning_rate": 0.001}
    assert [trial.params for trial in read_back(tmp_path).trials] == [{"learning_rate": 0.01}, {"learning_rate": 0.001}]


def test_report_ranks_the_trials_names_the_best_draws_the_plots_and_exports_it(tmp_path: Path) -> None:
    runs = [element(tmp_path, index, prune="none") for index in range(4)]
    for folder, value in zip(runs, (0.7, 0.9, 0.8, None)):
        prepare(folder, None)
        if value is not None:
            study.conclude(folder, value)
    loaded = trials.load(tmp_path / "sw-7", runs)
    shown = trials.lines(loaded)
    assert shown[0] == "study sw-7 (maximize): 4 trials" and shown[2].split()[:4] == ["1", "1", "COMPLETE", "0.9000"]
    assert shown[-1].startswith("best trial: 1 (element 1): 0.9000 with learning_rate=")
    rows = trials.csv_text(loaded).splitlines()
    assert rows[0].startswith("trial,element,state,value,") and rows[1].startswith("1,1,COMPLETE,0.9,")
    assert rows[-1].startswith("3,3,RUNNING,,")
    drawn = trials.plots(loaded, tmp_path / "sw-7")
    assert [path.name for path in drawn] == list(trials.PLOTS) and all(path.stat().st_size > 0 for path in drawn)
    settings = trials.export_best(loaded, lambda index: runs[index], tmp_path / "best.yaml")
    assert settings["learning_rate"] == study.read_trial(runs[1])["values"]["learning_rate"] != 0.001
    assert "output_dir" not in settings
    assert "the best trial (1, element 1)" in (tmp_path / "best.yaml").read_text()


def test_the_exported_best_is_a_plain_job_that_submit_accepts(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from hpc_train.config import TrainConfig, to_dict

    runs = [element(tmp_path, index) for index in range(2)]
    for folder, value in zip(runs, (0.7, 0.9)):
        # An element's config.yaml as the array's script writes it: every setting, the sweep's pruner among them.
        (folder / "config.yaml").write_text(yaml.safe_dump(to_dict(TrainConfig(prune="median", epochs=4))))
        prepare(folder, None)
        study.conclude(folder, value)
    best = tmp_path / "best.yaml"
    settings = trials.export_best(trials.load(tmp_path / "sw-7", runs), lambda index: runs[index], best)
    assert "prune" not in settings and settings["epochs"] == 4
    # The validation submit's does (job_request, sweep_request): render reads the options the same way.
    code, _, err = run_main(["render", "--nodes", "1", "--config", str(best), "-o", str(tmp_path / "best.sbatch")],
                            capsys)
    assert code == 0, err


@pytest.mark.parametrize("name", ["halving", "median", "hyperband", "none"])
def test_every_pruner_name_is_optunas(name: str) -> None:
    assert type(study.pruner(name, 8)).__module__.startswith("optuna.pruners")


def test_the_job_body_tells_the_study_only_when_the_element_does_not_go_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hpc_train.injob.body import settle_trial

    retried, failed = element(tmp_path, 0), element(tmp_path, 1)
    study.ask(retried), study.ask(failed)
    assert settle_trial(retried, 0, goes_on=True) == 0 and settle_trial(failed, 1, goes_on=False) == 1
    assert [trial.state.name for trial in read_back(tmp_path).trials] == ["RUNNING", "FAIL"]
    assert "hpc-train: trial 1: FAIL" in capsys.readouterr().err
    assert settle_trial(tmp_path / "plain-run", 1, goes_on=False) == 1  # no trial: nothing to tell


def test_a_commands_report_goes_to_its_elements_trial_from_rank_0_only(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import hpc_train

    folder = element(tmp_path, 0, prune="none")
    study.ask(folder)
    monkeypatch.setenv("HPC_TRAIN_RUN_DIR", str(folder))
    monkeypatch.setenv("SLURM_PROCID", "1")
    assert hpc_train.report(1, 0.5) is False and read_back(tmp_path).trials[0].intermediate_values == {}
    monkeypatch.setenv("SLURM_PROCID", "0")
    assert hpc_train.report(1, 0.5) is False and read_back(tmp_path).trials[0].intermediate_values == {1: 0.5}
    monkeypatch.delenv("HPC_TRAIN_RUN_DIR")
    assert hpc_train.report(2, 0.9) is False  # not in a sweep: nothing to report to


def test_a_command_pruned_through_report_shows_pruned_at_its_epoch_as_a_trainer_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hpc_train
    from hpc_train.runs import views

    better, worse = element(tmp_path, 0, prune="median"), element(tmp_path, 1, prune="median")
    study.ask(better), study.ask(worse)
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("HPC_TRAIN_RUN_DIR", str(better))
    assert hpc_train.report(1, 0.9) is False and study.conclude(better, 0.95) == "COMPLETE"
    monkeypatch.setenv("HPC_TRAIN_RUN_DIR", str(worse))
    assert hpc_train.report(1, 0.2) is True  # the command saves and exits 0: Slurm says COMPLETED
    assert study.settle(worse, 0) is None  # nothing more told: the trial is PRUNED already
    assert [views.shown_state("COMPLETED", views.read_run(folder)) for folder in (better, worse)] == \
        ["completed", "pruned@1"]
    assert read_back(tmp_path).trials[1].state.name == "PRUNED"


def test_a_study_in_a_database_url_instead_of_the_journal(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'studies.db'}"
    folder = element(tmp_path, 0, storage=url)
    kept = study.ask(folder)
    assert study.conclude(folder, 0.8) == "COMPLETE" and not (tmp_path / "sw-7" / study.STUDY_FILE).exists()
    assert optuna.load_study(study_name="sw-7", storage=url).trials[kept["number"]].value == 0.8


@pytest.mark.parametrize("broken", ["database", "journal"])
def test_a_study_that_cannot_be_asked_is_one_line_naming_its_storage_and_exit_1(
        broken: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hpc_train.injob.trial import main

    if broken == "database":
        folder, where = element(tmp_path, 0, storage=f"sqlite:///{tmp_path}/gone/s.db"), f"{tmp_path}/gone/s.db"
    else:  # the journal's folder is not one (a file in its place)
        (tmp_path / "sw-7").write_text("")
        folder, where = element(tmp_path, 0), str(tmp_path / "sw-7" / study.STUDY_FILE)
    assert main(["--run-dir", str(folder)]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "trial: asking the study in " in err and where in err and "from this node" in err


@pytest.mark.parametrize("grid", [False, True])
def test_an_element_that_crashed_before_its_trial_json_adopts_its_own_trial_on_restart(
        grid: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, other = element(tmp_path, 0), element(tmp_path, 1)
    fixed = {"learning_rate": 0.01, "batch_size": 64} if grid else None
    if grid:
        for folder in (first, other):
            spec = json.loads((folder / study.SEARCH_FILE).read_text())
            (folder / study.SEARCH_FILE).write_text(json.dumps({**spec, "sampler": "grid", "space": {
                "learning_rate": {"choices": [0.01, 0.1]}, "batch_size": {"choices": [32, 64]}}}))
    study.ask(other, fixed)  # another element's RUNNING trial: not this one's to adopt

    def killed(*_: object) -> None:
        raise KeyboardInterrupt("the node went down after the ask, before trial.json")

    monkeypatch.setattr(study, "write_json_atomically", killed)
    with pytest.raises(KeyboardInterrupt):
        study.ask(first, fixed)
    monkeypatch.undo()
    again = study.ask(first, fixed)  # the restarted element (its requeue, or a retry)
    trials_now = read_back(tmp_path).get_trials()
    assert len(trials_now) == 2 and again["number"] == 1 and trials_now[1].user_attrs["element"] == 0
    assert trials_now[1].params == again["values"] and trials_now[1].state.name == "RUNNING"


def test_a_study_that_cannot_be_told_the_end_is_one_warning_line_and_the_jobs_code_stays(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hpc_train.injob.trial import settle_trial

    folder = element(tmp_path, 0)
    study.ask(folder)
    spec = json.loads((folder / study.SEARCH_FILE).read_text())
    (folder / study.SEARCH_FILE).write_text(json.dumps({**spec, "storage": f"sqlite:///{tmp_path}/gone/s.db"}))
    assert settle_trial(folder, 3, goes_on=False) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "warning: telling the study failed (OperationalError: " in err, err
