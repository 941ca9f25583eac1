"""A user's own command as every rank of a job: under the bootstrap, told of Slurm's signals, its exit the job's.

Each rank computes its place from the Slurm step (TF_CONFIG, GPU binding, a
free port), says it in one line (`rank R is ROLE I at HOST:PORT, GPUs: G`),
and runs the command as a child, so that it can pass signals on and act on the
command's exit:

- Slurm's time-limit warning reaches the command as SIGUSR1, whichever signal
  the job asked for. Slurm signals every process of a rank, the command
  included: the job scripts and `render` ask for USR1, which so reaches it
  directly; `submit` (submitit) asks for USR2, which the command is started
  ignoring and which is passed on to it as USR1. SIGTERM (preemption,
  `scontrol requeue`, `scancel`, the time limit itself) reaches it directly
  too; this process waits for the command, which decides what to do.
- A command that saves on SIGUSR1 and exits with 75 (EX_TEMPFAIL) asks to go on
  later: rank 0 then requeues the job (`scontrol requeue`, at most
  `max_requeues` times), and the job runs the same command again, which resumes
  from what it saved.
- Otherwise the rank exits with the command's code (128 + N when a signal N
  ended it), so a rank that dies ends the step (`srun --kill-on-bad-exit=1`)
  and the job is FAILED with that code.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import FrameType

from hpc_train.bootstrap import BootstrapOptions
from hpc_train.bootstrap.layout import Layout
from hpc_train.bootstrap.startup import PREFIX, gpu_driver_note, start_rank
from hpc_train.errors import HpcTrainError
from hpc_train.jobs.requeue import plan_requeue, requeue
from hpc_train.exitcodes import EXIT_STOPPED

# How long the other ranks wait, after their command stopped to go on later, for rank 0 to requeue the job.
REQUEUE_GRACE_SECONDS = 10.0
WARNINGS = (signal.SIGUSR1, signal.SIGUSR2)
# Slurm (and hpc-train launch) signal every process of a rank: these reach the command by themselves.
REACHING_IT = (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT)


@dataclass(frozen=True)
class CommandJob:
    """What every rank of a command job runs, and how."""

    command: tuple[str, ...]
    strategy: str = "multiworker"
    num_ps: int = 1
    max_requeues: int = 5

    def __post_init__(self) -> None:
        if not self.command or not self.command[0]:
            raise HpcTrainError("no command after --: give the command every task runs, e.g. -- python train.py")

    def options(self) -> BootstrapOptions:
        return BootstrapOptions(strategy=self.strategy, num_ps=self.num_ps)


def place(options: BootstrapOptions, environ: Mapping[str, str]) -> tuple[Layout, dict[str, str]]:
    """This rank's layout and the environment its command gets; its port checked free; its line said."""
    layout, variables = start_rank(options, environ)
    env = {**environ, **variables}
    if note := gpu_driver_note(env):
        print(f"{PREFIX}: {note}", file=sys.stderr, flush=True)
    return layout, env


def run_command(job: CommandJob, environ: Mapping[str, str] | None = None) -> int:
    """Run the command as this rank of the step; return the rank's exit code."""
    layout, env = place(job.options(), os.environ if environ is None else environ)
    return supervise(job, env, is_first=layout.me.rank == 0)


def supervise(job: CommandJob, env: Mapping[str, str], is_first: bool) -> int:
    """Start the command, pass signals on until it ends, requeue when it asked to; its exit code."""
    relay = _Relay()
    relay.install()
    try:
        # Started ignoring USR2 (ignored signals stay ignored across exec): the command knows one warning, USR1.
        child = subprocess.Popen(list(job.command), env=dict(env), preexec_fn=_ignore_usr2)
    except FileNotFoundError:
        raise HpcTrainError(f"command not found: {job.command[0]!r}; check the command after --") from None
    except OSError as error:  # not executable, no #! line, ...
        raise HpcTrainError(f"cannot run {job.command[0]!r}: {error.strerror}; check the command after --") from None
    relay.child = child
    code = exit_code(child.wait())
    if code == EXIT_STOPPED and relay.warned:
        if is_first:
            _requeue(job, env)
        else:
            # A non-zero exit ends the step (--kill-on-bad-exit), signalling every process of rank 0 too,
            # its `scontrol requeue` included: leave rank 0 the time to requeue first, which ends us anyway.
            time.sleep(REQUEUE_GRACE_SECONDS)
    return code


def exit_code(returncode: int) -> int:
    """A process's exit status as a shell reports it: 128 + N when signal N ended it."""
    return 128 - returncode if returncode < 0 else returncode


def _requeue(job: CommandJob, env: Mapping[str, str]) -> None:
    plan = plan_requeue(env, job.max_requeues)
    if plan.job_id is None:
        _say(f"the command stopped to go on later (exit {EXIT_STOPPED}); not requeued: {plan.reason}")
        return
    problem = requeue(plan.job_id)
    if problem is None:
        _say(f"the command stopped to go on later (exit {EXIT_STOPPED}); requeued job {plan.job_id} ({plan.reason}): "
             "it runs the command again")
    else:
        _say(f"scontrol requeue {plan.job_id} failed ({problem}); resubmit the job to go on")


def _ignore_usr2() -> None:
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)


class _Relay:
    """Signal handlers: note a warning, turn USR2 into USR1 for the command, and outlive the others."""

    def __init__(self) -> None:
        self.child: subprocess.Popen[bytes] | None = None
        self.warned = False

    def install(self) -> None:
        for signum in {*WARNINGS, *REACHING_IT}:
            signal.signal(signum, self._note)

    def _note(self, signum: int, frame: FrameType | None) -> None:
        if signum in WARNINGS:
            self.warned = True
        if signum == signal.SIGUSR2 and self.child is not None and self.child.poll() is None:
            self.child.send_signal(signal.SIGUSR1)


def _say(message: str) -> None:
    print(f"hpc-train: {message}", file=sys.stderr, flush=True)


def supervised_arguments(job: CommandJob) -> list[str]:
    """hpc-train's arguments that run `job` as one rank under the bootstrap (for srun, or for launch)."""
    return ["bootstrap", "--supervise", "--strategy", job.strategy,
            *(("--num-ps", str(job.num_ps)) if job.strategy == "parameter_server" else ()),
            "--max-requeues", str(job.max_requeues), "--", *job.command]
