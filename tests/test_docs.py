"""The documentation: README.md is a short front page, and docs/ builds with `mkdocs build --strict`.

Strict mode with mkdocs.yml's `validation:` settings turns a link to a missing page or a missing
anchor into a failed build; the second test breaks a link on purpose to show that it does.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def mkdocs_build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """`python -m mkdocs build --strict` in `root`, into `site`; mkdocs' output in .stdout."""
    if importlib.util.find_spec("mkdocs") is None:
        pytest.fail(f"{sys.executable} cannot import mkdocs: install the test extra (env/setup.sh, or "
                    "pip install 'mkdocs>=1.6,<2')")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)


def test_the_docs_build_in_strict_mode(tmp_path: Path) -> None:
    build = mkdocs_build(ROOT, tmp_path / "site")
    assert build.returncode == 0, f"mkdocs build --strict failed:\n{build.stdout}"
    assert (tmp_path / "site" / "index.html").is_file()


@pytest.mark.parametrize("link", ["[a page that is not there](no-such-page.md)",
                                  "[an anchor that is not there](bootstrap.md#no-such-heading)"])
def test_a_broken_link_fails_the_build(tmp_path: Path, link: str) -> None:
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "index.md"
    page.write_text(page.read_text() + f"\nSee {link}.\n")
    build = mkdocs_build(tmp_path, tmp_path / "site")
    assert build.returncode != 0, f"mkdocs build --strict passed with a broken link:\n{build.stdout}"
    assert link.split("(")[1].rstrip(")") in build.stdout


def test_the_readme_is_a_front_page_naming_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    assert "env/demo.sh" in readme
    assert "env/test.sh" in readme

