"""A job's plan: what one submit or render makes of the options, and the one writer of the script a person reads.

Every job kind (a single job, a node range, a container, a sweep's array, a packed sweep, a heterogeneous job, a
remote's snapshot) is one JobPlan. `script()` is the text `render` prints and `submit --dry-run` prints: the same
bytes for the same options. `submitter` says which way `submit` sends it: submitit, for the kinds it can express (its
pickled callable is the job body itself, run once on the batch host: injob/entrypoints.py), else the script itself
through the Slurm client (a sweep's array, a pack, a heterogeneous job, a job without a time-limit warning). Whichever
way, Slurm is asked the plan's `resources()` (spec/directives.py's `asked` reads them back from a script: the tests
compare the two).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from hpc_train.config import TrainConfig
from hpc_train.login.script import job_image, pack_summary, render_script
from hpc_train.runs.folders import ELEMENT_BATCH_LOG
from hpc_train.runs.joblog import BATCH_LOG
from hpc_train.runs.snapshot import JobCode
from hpc_train.spec.directives import asked
from hpc_train.spec.request import JobRequest
from hpc_train.spec.sweep import Sweep

SUBMITIT = "submitit"
SBATCH = "sbatch"


@dataclass(frozen=True)
class JobPlan:
    """One job as submit and render see it: the request, its settings, where its folders go, what runs."""

    request: JobRequest
    train: TrainConfig
    home: str | None = None  # --home: the environment the job activates and runs hpc-train from
    activates: str | None = None  # what the script activates without --home (the checkout or environment here)
    runs: Path = Path("runs")  # the runs folder, as given (relative to where the job is submitted from)
    command: tuple[str, ...] | None = None  # a user's command for every rank, instead of the trainer
    code: JobCode | None = None  # the snapshot every attempt runs; None: the code on disk
    sweep: Sweep | None = None
    max_parallel: int | None = None

    @property
    def kind(self) -> str:
        """The job's kind, in a word (docs/architecture.md: which way each is submitted, and why)."""
        if self.request.components > 1:  # (ps on CPU nodes, or the data service's own component)
            return "heterogeneous"
        if self.sweep is not None:
            return "pack" if self.request.pack is not None else "sweep"
        return "range" if self.request.ranged else "container" if job_image(self.request) else "single"

    @property
    def submitter(self) -> str:
        """submitit where it can say the job (one group, one job, a warning before the time limit: submitit always
        asks for one); else the script itself, through the Slurm client."""
        expressible = self.kind in ("single", "range", "container") and self.request.signal_seconds > 0
        return SUBMITIT if expressible else SBATCH

    @property
    def home_text(self) -> str:
        """What the script activates: --home, else the checkout or environment hpc-train runs from here."""
        return self.home if self.home is not None else self.activates or sys.prefix

    @property
    def runs_dir(self) -> str:
        """The runs folder in the script: as given, or absolute when the job starts in its snapshot (elsewhere)."""
        return str(self.runs.absolute() if self.code is not None else self.runs)

    def script(self) -> str:
        """The script a person reads: render's, a dry run's, and for a job the Slurm client submits, Slurm's (one
        writer for every kind: login/script.py)."""
        return render_script(self.request, self.train, self.home_text, runs_dir=self.runs_dir, command=self.command,
                             sweep=self.sweep, max_parallel=self.max_parallel, code=self.code)

    def heading(self) -> str:
        """A sweep's elements (or a pack's trials) in one line for people, as render and submit say them."""
        spec, sweep = self.request, self.sweep
        assert sweep is not None
        if self.kind == "pack":
            return pack_summary(spec, sweep, self.max_parallel)
        drawn = "" if sweep.seed is None else \
            f" drawn at random (seed {sweep.seed}: the same seed draws them again)"  # (the YAML's, or drawn at submit)
        return f"a sweep of {len(sweep)} elements{drawn}, each a job of {spec.nodes} node(s)"

    def job_log(self) -> str | None:
        """Where submit puts the job's own log, as a Slurm filename pattern: in its run folder (runs/joblog.py), which
        submit makes before the job can start: submitit's job's, a sweep's element's, a pack's. None: where sbatch
        runs (a heterogeneous job, one without a time-limit warning), linked into the run folder as it starts."""
        if self.kind == "sweep":
            return str(self.runs.absolute() / ELEMENT_BATCH_LOG)
        if self.kind == "pack" or self.submitter == SUBMITIT:
            return str(self.runs.absolute() / BATCH_LOG)
        return None

    def batch_log(self) -> str | None:
        """The batch log submit puts on sbatch's command line (--output, over the script's) for a script it submits
        held: a sweep's element's and a pack's, in its own run folder, which submit makes while the job is held."""
        return self.job_log() if self.kind in ("sweep", "pack") else None

    def sbatch_options(self) -> tuple[str, ...]:
        """What submit adds on sbatch's command line: held (released once the folders are there), the batch log."""
        log = self.batch_log()
        return ("--hold", *((f"--output={log}",) if log else ()))

    def how(self) -> str:
        """One line: which way submit sends this job, and what runs it."""
        if self.submitter == SUBMITIT:
            return ("submitted through submitit: its job runs the job body once on the batch host, with these "
                    "#SBATCH options")
        why = {"heterogeneous": "a heterogeneous job", "sweep": "a job array", "pack": "a packed sweep"}.get(
            self.kind, "a job without a time-limit warning")
        return f"submitted as this script through sbatch ({why})"

    def resources(self) -> dict[str, str]:
        """What the job asks of Slurm (its first group's: RESOURCES), as `asked` reads a script."""
        return asked(self.script())
