"""What each rank of a submitted job runs (through submitit): the trainer, writing into the job's folder.

Kept free of TensorFlow at import time: the login node pickles a reference to
`train_task`, and only the compute node imports the trainer. A rank that stops
on a signal (to be requeued) ends its process there and then, so submitit
records no result for a job that is not over.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def train_task(settings: dict[str, Any]) -> int:
    """Train with these settings; the output goes to this job's folder (runs/NAME-JOBID)."""
    import submitit

    from hpc_train.config import TrainConfig
    from hpc_train.errors import HpcTrainError, report
    from hpc_train.training.stderr_filter import filter_stderr
    from hpc_train.training.trainer import run

    filter_stderr()  # the rank logs without TensorFlow's CPU-node start-up noise
    folder = submitit.JobEnvironment().paths.folder
    try:
        code = run(TrainConfig(**{**settings, "output_dir": str(folder)}))
    except HpcTrainError as error:
        # As `hpc-train train` says it (one line, a user function's own traceback), not as a traceback through
        # submitit and hpc-train; the exit code ends the step (srun --kill-on-bad-exit) and fails the job.
        sys.exit(report(error, "hpc-train train"))
    if code != 0:
        raise RuntimeError(f"training exited with code {code}")  # submitit marks the job failed
    return code


def command_task(command: list[str], strategy: str, num_ps: int, max_requeues: int, keras: str = "auto",
                 command_signal: str = "USR1") -> int:
    """Run the user's command as this rank, under the bootstrap, in the directory the job was submitted from.

    HPC_TRAIN_RUN_DIR names the job's folder (runs/NAME-JOBID), for the command's own checkpoints and outputs.
    A non-zero exit ends this process with the command's code: the step, and the job, end with it.
    """
    import os

    import submitit

    from hpc_train.errors import HpcTrainError, report
    from hpc_train.injob.supervisor import CommandJob, run_command

    os.environ["HPC_TRAIN_RUN_DIR"] = str(Path(submitit.JobEnvironment().paths.folder).resolve())
    try:
        code = run_command(CommandJob(tuple(command), strategy, num_ps, max_requeues, keras, command_signal))
    except HpcTrainError as error:
        code = report(error, "hpc-train submit")
    if code != 0:
        from hpc_train.training.stderr_filter import drain

        sys.stdout.flush()
        drain()  # os._exit skips atexit: the rank log's filter gets the last lines (the error) now
        os._exit(code)  # not an exception: submitit would turn it into exit code 1 and a traceback
    return code
