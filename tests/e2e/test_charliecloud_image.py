"""The containers' test image builder (tests/e2e/charliecloud_image.py), with a stand-in debootstrap: a failed build
says why and is not tried again meanwhile, a killed build's leftovers go, a build is renamed the image. No cluster."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e import charliecloud_image

pytestmark = pytest.mark.quick


@pytest.fixture
def builder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """charliecloud_image with its paths in tmp_path and a debootstrap that does what tmp_path/outcome says."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    debootstrap = bin_dir / "debootstrap"
    debootstrap.write_text('#!/bin/sh\necho run >> "$(dirname "$0")/../runs"\n'
                           'if [ "$(cat "$(dirname "$0")/../outcome")" = ok ]; then\n'
                           '  mkdir -p "$4/usr/bin" && touch "$4/usr/bin/python3"; exit 0\nfi\n'
                           'echo "E: no mirror" >&2; exit 1\n')
    debootstrap.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(charliecloud_image, "IMAGE", tmp_path / "image")
    monkeypatch.setattr(charliecloud_image, "STATE", tmp_path / "image.state")
    return tmp_path


def runs(folder: Path) -> int:
    return len((folder / "runs").read_text().splitlines()) if (folder / "runs").exists() else 0


def test_a_failed_build_says_why_and_is_not_tried_again_within_the_hour(builder: Path) -> None:
    (builder / "outcome").write_text("fail")
    leftover = builder / "image.build-1"
    leftover.mkdir()
    assert "E: no mirror" in (charliecloud_image.build() or "")
    assert not leftover.exists() and not list(builder.glob("image.build-*"))  # nothing half-built left
    assert "E: no mirror" in (charliecloud_image.build() or "") and runs(builder) == 1  # the record, not a rerun
    assert oct((builder / "image.state").stat().st_mode & 0o777) == "0o700"


def test_a_build_becomes_the_image_and_the_next_call_builds_nothing(builder: Path) -> None:
    (builder / "outcome").write_text("ok")
    assert charliecloud_image.build() is None and charliecloud_image.ready()
    assert charliecloud_image.build() is None and runs(builder) == 1
