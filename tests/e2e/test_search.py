"""An adaptive search on a real Slurm: a TPE search's elements ask one Optuna study (study.journal) for their values
as they start; a requeued element keeps its trial; the study reads back through Optuna (issue 31)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import yaml

from hpc_train.localslurm import control
from hpc_train.localslurm.spec import LocalCluster
from tests.e2e.test_sweeps import wait_for_elements
from tests.fake_slurm import without_slurm

pytestmark = pytest.mark.slurm_cluster
ROOT = Path(__file__).resolve().parents[2]
# A command that reports a figure per epoch (better with a larger learning rate); element 0's first attempt
# waits to be requeued (its marker in the run folder says it already started once).
TRAINS = """
import os, sys, time
from pathlib import Path
import hpc_train
rate, batch, dropout = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
run = Path(os.environ["HPC_TRAIN_RUN_DIR"])
if os.environ["HPC_TRAIN_TRIAL"] == "0" and not (run / "started").exists():
    (run / "started").write_text("once")
    time.sleep(120)
print("values", rate, batch, dropout, flush=True)
for epoch in (1, 2):
    hpc_train.report(epoch, rate * epoch)
"""


def test_a_tpe_search_draws_each_elements_values_once_and_a_requeued_element_keeps_its_trial(
        cluster: LocalCluster, tmp_path: Path) -> None:
    env = {**without_slurm(), **control.slurm_env(cluster), "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT)}
    submitted = subprocess.run(
        [sys.executable, "-m", "hpc_train", "submit", "--nodes", "1", "--name", "tpe", "--sweep",
         "learning_rate=1e-4:1e-1:log", "--sweep", "batch_size=32,64", "--sweep", "dropout=0.1:0.5", "--search", "tpe",
         "--trials", "3", "--max-parallel", "2", "--", sys.executable, "-c", TRAINS, "{learning_rate}",
         "{batch_size}", "{dropout}"],  # dropout: a key of the command's own (issue 46)
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert submitted.returncode == 0, submitted.stderr
    array = submitted.stdout.splitlines()[0]
    runs = [tmp_path / "runs" / f"tpe-{array}_{index}" for index in range(3)]
    deadline = time.monotonic() + 120
    while not (runs[0] / "started").exists():
        assert time.monotonic() < deadline, "element 0 never started"
        time.sleep(0.2)
    first = json.loads((runs[0] / "trial.json").read_text())
    while subprocess.run(["scontrol", "requeue", f"{array}_0"], env=env, capture_output=True).returncode != 0:
        assert time.monotonic() < deadline, "scontrol requeue was refused"
        time.sleep(0.5)
    states, most_running = wait_for_elements(array, 3, env)
    assert states == {index: "COMPLETED" for index in range(3)} and most_running <= 2, states
    kept = [json.loads((run / "trial.json").read_text()) for run in runs]
    assert kept[0] == first  # requeued: the same trial, the same values
    study = optuna.load_study(study_name=f"tpe-{array}", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "runs" / f"tpe-{array}" / "study.journal"))))
    assert len(study.trials) == 3 and all(trial.state.name == "COMPLETE" for trial in study.trials)
    for run, trial in zip(runs, kept):
        values = trial["values"]
        drawn = study.trials[trial["number"]]
        assert drawn.params == values and drawn.value == pytest.approx(values["learning_rate"] * 2, rel=1e-5)
        assert 1e-4 <= values["learning_rate"] <= 1e-1 and values["batch_size"] in (32, 64)
        assert isinstance(values["dropout"], float) and 0.1 <= values["dropout"] <= 0.5
        config = yaml.safe_load((run / "config.yaml").read_text())
        assert (config["learning_rate"], config["batch_size"]) == (values["learning_rate"], values["batch_size"])
        assert "dropout" not in config  # a command's own key: no setting
        log = (run / "logs" / "rank-0.out").read_text()
        assert f"values {values['learning_rate']:.6g} {values['batch_size']} {values['dropout']:.6g}" in log, log
    status = subprocess.run([sys.executable, "-m", "hpc_train", "status", array], cwd=tmp_path, env=env,
                            capture_output=True, text=True)
    assert "INDEX  learning_rate  batch_size" in status.stdout, status.stdout
    report = subprocess.run([sys.executable, "-m", "hpc_train", "report", array, "--export", "best.yaml"],
                            cwd=tmp_path, env=env, capture_output=True, text=True)
    assert report.returncode == 0 and "best trial:" in report.stdout, report.stdout + report.stderr
    best = max(kept, key=lambda trial: trial["values"]["learning_rate"])
    assert f"best trial: {best['number']} " in report.stdout, report.stdout
    assert (tmp_path / "runs" / f"tpe-{array}" / "study-history.png").is_file()
    assert yaml.safe_load((tmp_path / "best.yaml").read_text())["learning_rate"] == best["values"]["learning_rate"]
    assert (tmp_path / "runs" / f"tpe-{array}" / "sweep.csv").read_text().startswith("trial,element,state,value,")


# A command element that reports its learning rate once (issue 36: quick, no TensorFlow).
REPORTS = """
import sys
import hpc_train
rate = float(sys.argv[1])
print("values", rate, flush=True)
hpc_train.report(1, rate)
"""


def test_two_sweeps_submitted_at_once_share_a_named_study_and_a_later_one_continues_it(
        cluster: LocalCluster, tmp_path: Path) -> None:
    env = {**without_slurm(), **control.slurm_env(cluster), "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT)}
    name, url = "lr's study; $(touch PWNED)", f"sqlite:///{tmp_path / 'studies.db'}"  # a new database

    def submit(sweep: str, trials: int) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "hpc_train", "submit", "--nodes", "1", "--name", sweep, "--sweep",
             "learning_rate=1e-4:1e-1:log", "--search", "random", "--trials", str(trials), "--study-name", name,
             "--study-storage", url, "--", sys.executable, "-c", REPORTS, "{learning_rate}"],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def completed(sweep: str, submitted: subprocess.Popen[str], trials: int) -> tuple[str, int]:
        out, err = submitted.communicate(timeout=120)
        assert submitted.returncode == 0, err
        array = out.splitlines()[0]
        states, _ = wait_for_elements(array, trials, env)
        assert states == {index: "COMPLETED" for index in range(trials)}, states
        seed = json.loads((tmp_path / "runs" / f"{sweep}-{array}_0" / "search.json").read_text())["seed"]
        assert f"random search of {trials} trials (seed {seed})" in err, err  # shown as recorded
        return array, seed

    both = [submit("one", 2), submit("two", 2)]  # at once
    (first, first_seed), (second, second_seed) = (completed(sweep, submitted, 2)
                                                  for sweep, submitted in zip(("one", "two"), both))
    assert first_seed != second_seed  # drawn at submit
    study = optuna.load_study(study_name=name, storage=url)
    assert optuna.study.get_all_study_names(url) == [name]
    assert [trial.state.name for trial in study.trials] == ["COMPLETE"] * 4
    assert sorted((trial.user_attrs["sweep"], trial.user_attrs["element"]) for trial in study.trials) == \
        [(f"one-{first}", 0), (f"one-{first}", 1), (f"two-{second}", 0), (f"two-{second}", 1)]
    rates = [trial.params["learning_rate"] for trial in study.trials]
    assert len(set(rates)) == 4 and [trial.value for trial in study.trials] == pytest.approx(rates, rel=1e-5)
    for sweep, array in (("one", first), ("two", second)):
        for index in range(2):
            kept = json.loads((tmp_path / "runs" / f"{sweep}-{array}_{index}" / "trial.json").read_text())
            assert kept["study"] == name and study.trials[kept["number"]].params == kept["values"]
    third, third_seed = completed("three", submit("three", 1), 1)
    kept = json.loads((tmp_path / "runs" / f"three-{third}_0" / "trial.json").read_text())
    assert kept["number"] == 4  # a later sweep continues where the study stands
    report = subprocess.run([sys.executable, "-m", "hpc_train", "report", third], cwd=tmp_path, env=env,
                            capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    assert f"study {name} (maximize): 5 trials; this sweep's seed {third_seed}" in report.stdout, report.stdout
    assert f"one-{first}_0" in report.stdout and not (tmp_path / "PWNED").exists()
