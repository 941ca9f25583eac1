"""Where the suite's time goes, test by test and worker by worker: with HPC_TRAIN_TEST_TIMELINE=DIR each worker
appends one line per test phase to DIR/WORKER.jsonl (its start and stop, from pytest's own report), and
benchmarks/suite_timeline.py draws the lanes. The 30 slowest tests (`--durations`) say what is slow; this says
which worker ends last and what it ran, the suite's time being its last worker's end (issue 46)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

VARIABLE = "HPC_TRAIN_TEST_TIMELINE"


def record(folder: str, report: pytest.TestReport) -> None:
    """One phase of a test, by the process that ran it (an xdist worker's report reaches the controller too,
    carrying its `node`: that copy is not written again)."""
    if getattr(report, "node", None) is not None:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    line = {"worker": worker, "test": report.nodeid, "when": report.when, "start": report.start,
            "stop": report.stop, "outcome": report.outcome}
    Path(folder).mkdir(parents=True, exist_ok=True)
    with open(Path(folder) / f"{worker}.jsonl", "a") as out:
        out.write(json.dumps(line) + "\n")
