"""The suite's timeline (tests/timeline.py, benchmarks/suite_timeline.py): each phase recorded once, by the process
that ran it, and a test's phases read back as one span."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.timeline import record

ROOT = Path(__file__).resolve().parents[1]


def phase(when: str, start: float, stop: float, **extra: object) -> SimpleNamespace:
    return SimpleNamespace(nodeid="tests/e2e/test_x.py::test_y", when=when, start=start, stop=stop,
                           outcome="passed", **extra)


def test_a_workers_phases_are_one_span_and_the_controllers_copy_is_not_written(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    for when, start, stop in (("setup", 10.0, 11.0), ("call", 11.0, 20.0), ("teardown", 20.0, 20.5)):
        record(str(tmp_path), phase(when, start, stop))
    record(str(tmp_path), phase("call", 11.0, 20.0, node=object()))  # the controller's copy of a worker's report
    assert len((tmp_path / "gw2.jsonl").read_text().splitlines()) == 3
    spec = importlib.util.spec_from_file_location("suite_timeline", ROOT / "benchmarks" / "suite_timeline.py")
    timeline = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(timeline)
    [span] = timeline.tests(tmp_path)
    assert (span["worker"], span["start"], span["stop"]) == ("gw2", 10.0, 20.5)
    assert timeline.kind(span["test"]) == "the session's cluster"
    assert json.loads((tmp_path / "gw2.jsonl").read_text().splitlines()[1])["when"] == "call"
