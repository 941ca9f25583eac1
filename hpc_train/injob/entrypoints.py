"""What submitit pickles for a job `submit` sends through it: the job body itself, run once on the batch host.

The executor is made with `use_srun=False` (login/submission.py): the last line of submitit's script runs this
callable in the batch shell, where every script hpc-train writes execs `hpc-train job ...` (templates/job.sbatch).
It writes the job's settings into its run folder and runs the job body (injob/body.py), which starts the step (srun)
whose ranks run the trainer, or the user's command supervised. Its outcome is the job's: `job.result()` is 0, or
raises submitit's FailedJobError naming the body's exit code, which is also the job's exit code in Slurm.
"""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from hpc_train.injob.jobline import JobBody
from hpc_train.runs.folders import RANK_LOG_PATTERN, run_folder
from hpc_train.runs.state import write_text_atomically


class JobEnded(SystemExit, Exception):
    """The body's exit code, not 0: an Exception, so that submitit keeps it as the job's result (an error), and a
    SystemExit, so that once submitit raises it again the process exits with that code (no traceback)."""

    def __str__(self) -> str:
        return f"hpc-train's job body ended with exit code {self.code}"


@dataclass(frozen=True)
class JobCall:
    """The job body of one job, as submitit pickles it: its name and runs folder (the run folder is NAME-JOBID
    there), its body, its settings (config.yaml's text), and the ranks' hpc-train arguments (None: the trainer)."""

    name: str
    runs: Path  # absolute
    body: JobBody
    config: str
    rank_arguments: tuple[str, ...] | None = None

    def folder(self, job_id: str) -> Path:
        return run_folder(self.runs, self.name, job_id)

    def rank_command(self, folder: Path) -> list[str]:
        """What srun starts on every task: this Python's hpc-train, the trainer or the supervised command."""
        python = [sys.executable, "-u", "-m", "hpc_train"]
        if self.rank_arguments is not None:
            return [*python, *self.rank_arguments]
        return [*python, "train", "--config", str(folder / "config.yaml"), "--output-dir", str(folder)]

    def __call__(self) -> int:
        from hpc_train.injob.body import run_job

        # As an exec'd body's: the signals' own actions (submitit's handlers log a SIGTERM and go on, and would
        # requeue the job on USR2 themselves); the body installs its own where it needs them.
        for signum in (signal.SIGTERM, signal.SIGCONT, signal.SIGUSR2):
            signal.signal(signum, signal.SIG_DFL)
        folder = self.folder(os.environ["SLURM_JOB_ID"])
        (folder / "logs").mkdir(parents=True, exist_ok=True)
        write_text_atomically(folder / "config.yaml", self.config)  # (submit writes the same, after sbatch)
        # (srun's %j: the rank logs' pattern as every script of hpc-train's writes it)
        code = run_job(replace(self.body, run_dir=folder, output=str(self.folder("%j") / RANK_LOG_PATTERN)),
                       self.rank_command(folder), os.environ)
        if code != 0:
            raise JobEnded(code)
        return code
