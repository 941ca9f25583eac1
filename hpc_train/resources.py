"""Files hpc-train ships beside its code: the job template, the job scripts, the examples, the site setup.

In a checkout (or an editable install) hpc_train/_data/ links to the top-level
templates/, slurm/, examples/ and env/; a wheel holds copies of them there. One
lookup serves both.
"""

from __future__ import annotations

from pathlib import Path

from hpc_train.errors import HpcTrainError

DATA = Path(__file__).resolve().parent / "_data"


def resource(relative: str) -> Path:
    """The shipped file `relative` ("templates/job.sbatch"); one line naming it when the install lacks it."""
    path = DATA / relative
    if not path.exists():
        raise HpcTrainError(f"{relative} is missing from this hpc-train install ({DATA}); reinstall it "
                            "(pip install --force-reinstall hpc-train, or env/setup.sh in a checkout)")
    return path


def checkout_root() -> Path | None:
    """The source tree hpc-train runs from, if it runs from one (not from an installed wheel)."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() and (root / "env" / "activate.sh").is_file() else None
