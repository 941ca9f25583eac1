"""`hpc-train report ID` names a tracked sweep's parent run whatever the sweep: a grid (tests/e2e/test_tracking.py)
or an adaptive search of a command, which is ranked from its study (no metrics.json)."""

from __future__ import annotations

import json
from pathlib import Path

from hpc_train.runs import study
from hpc_train.runs.state import write_tracking
from tests.login.test_sweep_jobs import hpc_train, mock_array_slurm


def test_the_report_of_a_commands_search_names_the_parent_run(tmp_path: Path) -> None:
    fake = mock_array_slurm(tmp_path / "fake")
    submitted = hpc_train("submit", "--nodes", "1", "--name", "sw", "--sweep", "learning_rate=1e-4:1e-1:log",
                          "--search", "tpe", "--trials", "2", "--", "true", cwd=tmp_path, fake=fake)
    assert submitted.returncode == 0, submitted.stderr
    runs = tmp_path / "runs"
    for index, value in enumerate((0.5, 0.7)):  # as each element's job body does: ask, then conclude
        element = runs / f"sw-4242_{index}"
        (element / study.SEARCH_FILE).write_text(json.dumps(
            {"sampler": "tpe", "seed": 0, "space": {"learning_rate": {"low": 1e-4, "high": 1e-1, "log": True,
                                                                      "int": False}},
             "keys": ["learning_rate"], "prune": "none", "epochs": 1, "objective": "score", "minimize": False,
             "storage": None}))
        study.ask(element)
        study.conclude(element, value)
    write_tracking(runs / "sw-4242", run_id="parent123", uri="http://mlflow:5000", experiment="sw")
    report = hpc_train("report", "4242", cwd=tmp_path, fake=fake)
    assert report.returncode == 0, report.stderr
    assert "best trial: 1 " in report.stdout, report.stdout  # ranked from the study
    assert "MLflow parent run parent123 in experiment sw; see it: http://mlflow:5000" in report.stdout.splitlines()
