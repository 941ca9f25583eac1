from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from tests.fake_slurm import without_slurm

# CI runs a fixed set of examples, so a red run can be replayed; locally they vary.
settings.register_profile("ci", derandomize=True, deadline=None, max_examples=200,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=100)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """os.environ without any Slurm, CUDA or TF_CONFIG variable of the machine running the tests."""
    for name in set(os.environ) - set(without_slurm()):
        monkeypatch.delenv(name)
