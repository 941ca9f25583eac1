"""A user's own command as every rank of a job: under the bootstrap, told of Slurm's signals, its exit the job's.

Each rank computes its place from the Slurm step (TF_CONFIG, GPU binding, a
free port), says it in one line (`rank R is ROLE I at HOST:PORT, GPUs: G`),
and runs the command as a child, so that it can pass signals on and act on the
command's exit:

- Slurm's time-limit warning reaches the command as SIGUSR1 (`--command-signal
  USR1`, the default), whichever signal the job asked for. Slurm signals every
  process of a rank, the command included: every script hpc-train writes, and
  `submit`'s through submitit, asks for USR1, which so reaches it directly; a
  job asking for USR2 (a script of a user's own) has it passed on as USR1, the
  command being started ignoring USR2.
  With `--command-signal TERM` the command is started ignoring both, and the
  warning is passed on as SIGTERM, which TensorFlow's own
  PreemptionCheckpointHandler watches. A warning passed on waits until the
  command catches that signal (at most a minute: warninghold.py), so that one
  arriving while it starts or exits is not its death; one that came before
  the command started is passed on as it starts. SIGTERM (preemption,
  `scontrol requeue`, `scancel`, the time limit itself) reaches it directly
  too; this process waits for the command, which decides what to do.
- A command that saves after the warning and exits with 75 (EX_TEMPFAIL), or
  with 42 (PreemptionCheckpointHandler's restart code), asks to go on later:
  rank 0 then requeues the job (`scontrol requeue`, at most `max_requeues`
  times), and the job runs the same command again, which resumes from what it
  saved.
- Otherwise the rank exits with the command's code (128 + N when a signal N
  ended it), so a rank that dies ends the step (`srun --kill-on-bad-exit=1`)
  and the job is FAILED with that code.

The job's hang watchdog (watchdog.py) may ask every rank for its stacks: the command has no thread of ours
to answer, so this process answers for it with py-spy's dump of its Python processes (pyspy.py).

The command's `tf.keras` is tf-keras (TF_USE_LEGACY_KERAS=1) when it fits this
TensorFlow, unless the user set the variable or chose `--keras 3`
(bootstrap/keras.py); the rank line says which. Its stderr goes through the
rank log's filter of TensorFlow's start-up noise (bootstrap/stderr_filter.py), which
also watches for Keras 3's known failures: a command that fails with one ends
its log with a line saying why and what to do.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from hpc_train.bootstrap import BootstrapOptions
from hpc_train.bootstrap.keras import KNOWN_FAILURES, KerasChoice, choose_keras, failure_hint, installed_versions
from hpc_train.bootstrap.layout import Layout
from hpc_train.bootstrap.startup import PREFIX, gpu_driver_note, start_rank
from hpc_train.bootstrap.tmpdir import made
from hpc_train.errors import HpcTrainError
from hpc_train.config import COMMAND_SIGNALS, DEFAULT_MAX_REQUEUES
from hpc_train.exitcodes import EXIT_STOPPED, EXIT_TF_PREEMPTION
from hpc_train.runs import attempts
from hpc_train.runs.stacks import answer_requests
from hpc_train.injob import warninghold
from hpc_train.injob.pyspy import allow_parent_to_trace, answer_for
from hpc_train.runs.requeue import RequeueOutcome, requeue_stopped
from hpc_train.bootstrap import stderr_filter
from hpc_train.utilization.sampler import join_node

# How long the other ranks wait, after their command stopped to go on later, for rank 0 to requeue the job: rank
# 0's command may still be saving (a large model's checkpoint, a parallel file system, a loaded node: tens of
# seconds), and a rank that leaves first ends the step (--kill-on-bad-exit) and kills it mid-save, the job then
# failed instead of requeued (10 s did, on a loaded machine). The wait ends as soon as the step does (rank 0's
# requeue or exit); beyond the warning's usual lead (USR1@120) the time limit ends the job anyway.
REQUEUE_GRACE_SECONDS = 120.0
WARNINGS = (signal.SIGUSR1, signal.SIGUSR2)
# Slurm (and hpc-train launch) signal every process of a rank: these reach the command by themselves.
REACHING_IT = (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT)
# A command's exits that ask to go on later, after the warning: saved, not finished.
GO_ON_LATER = (EXIT_STOPPED, EXIT_TF_PREEMPTION)


@dataclass(frozen=True)
class CommandJob:
    """What every rank of a command job runs, and how."""

    command: tuple[str, ...]
    strategy: str = "multiworker"
    num_ps: int = 1
    max_requeues: int = DEFAULT_MAX_REQUEUES
    keras: str = "auto"  # what tf.keras is: auto (tf-keras when it fits), 2 (tf-keras, or refuse), 3 (Keras 3)
    command_signal: str = "USR1"  # the signal the time-limit warning reaches the command as

    def __post_init__(self) -> None:
        if not self.command or not self.command[0]:
            raise HpcTrainError("no command after --: give the command every rank runs, e.g. -- python train.py")
        if self.command_signal not in COMMAND_SIGNALS:
            raise HpcTrainError(f"--command-signal {self.command_signal!r}: expected {' or '.join(COMMAND_SIGNALS)}")
        choose_keras(self.keras, {}, {})  # refuses an unknown --keras

    def options(self) -> BootstrapOptions:
        return BootstrapOptions(strategy=self.strategy, num_ps=self.num_ps)


def place(options: BootstrapOptions, environ: Mapping[str, str],
          choice: KerasChoice) -> tuple[Layout, dict[str, str]]:
    """This rank's layout and the environment its command gets, its Keras chosen; its port checked free; its line
    said."""
    layout, variables = start_rank(options, environ, f"Keras: {choice.description}" if choice.description else "")
    env = {**environ, **variables, **choice.variables}
    join_node(env, os.getpid(), slurms=environ.get("CUDA_VISIBLE_DEVICES"))  # sampled by its node's sampler
    if choice.problem:
        print(f"{PREFIX}: warning: {choice.problem}", file=sys.stderr, flush=True)
    if note := gpu_driver_note(env):
        print(f"{PREFIX}: {note}", file=sys.stderr, flush=True)
    return layout, env


def keras_for(job_keras: str, environ: Mapping[str, str]) -> KerasChoice:
    """What the command's tf.keras is, from --keras, the environment and the packages installed."""
    return choose_keras(job_keras, environ, installed_versions())


def run_command(job: CommandJob, environ: Mapping[str, str] | None = None,
                options: BootstrapOptions | None = None) -> int:
    """Run the command as this rank of the step, its stderr cleaned of TensorFlow's start-up noise; return the
    rank's exit code. `options`: the bootstrap's, when more than the job's strategy (a --port-base).

    Under Keras 3 the filter also watches for Keras 3's known failures: a command that fails with one has its
    log end, after its last line, with one line saying why and what to do."""
    env = dict(os.environ if environ is None else environ)
    with made(env):  # the rank's own TMPDIR (exported in env), the command's too, gone when the rank ends
        return _run_command(job, env, options)


def _run_command(job: CommandJob, environ: Mapping[str, str], options: BootstrapOptions | None) -> int:
    choice = keras_for(job.keras, environ)
    tensorflow = installed_versions().get("tensorflow")
    stderr_filter.filter_stderr([] if choice.legacy else [(pattern, failure_hint(index, choice.description, tensorflow))
                                                  for index, (pattern, _) in enumerate(KNOWN_FAILURES)])
    relay = Relay(signal.SIGTERM if job.command_signal == "TERM" else signal.SIGUSR1)
    relay.install(WARNINGS)  # a warning while the rank is placed: kept for the command, not this process's end
    try:
        layout, env = place(options or job.options(), environ, choice)
        code = supervise(job, env, is_first=layout.me.rank == 0, relay=relay)
    except HpcTrainError as error:  # hpc-train's own refusal (a bad Slurm step, a command not found): not retried
        if environ.get("HPC_TRAIN_RUN_DIR"):
            attempts.note_failure(environ["HPC_TRAIN_RUN_DIR"], "refused", str(error), environ=environ)
        raise
    if code != 0:
        stderr_filter.say_failed()
    return code


def supervise(job: CommandJob, env: Mapping[str, str], is_first: bool, relay: Relay) -> int:
    """Start the command, pass signals on until it ends, requeue when it asked to; its exit code. `relay`: the
    rank's, its warnings' handlers installed since the rank started."""
    relay.install({*WARNINGS, *REACHING_IT})
    try:
        # Started ignoring the warnings it is not to see (ignored signals stay ignored across exec): USR2, and
        # USR1 too when the warning reaches it as TERM.
        ignored = (signal.SIGUSR2,) if job.command_signal == "USR1" else (signal.SIGUSR1, signal.SIGUSR2)
        traceable = allow_parent_to_trace()  # py-spy, this process's child, may read its stacks (pyspy.py)
        child = subprocess.Popen(list(job.command), env=dict(env), preexec_fn=lambda: _ignore(ignored, traceable))
    except FileNotFoundError:
        raise HpcTrainError(f"command not found: {job.command[0]!r}; check the command after --") from None
    except OSError as error:  # not executable, no #! line, ...
        raise HpcTrainError(f"cannot run {job.command[0]!r}: {error.strerror}; check the command after --") from None
    relay.attach(child)
    if env.get("HPC_TRAIN_RUN_DIR"):  # the hang watchdog may ask for the command's stacks: py-spy answers
        answer_requests(env["HPC_TRAIN_RUN_DIR"], env, answer_for(child.pid, env))
    returncode = child.wait()
    code = exit_code(returncode)
    if code != 0 and env.get("HPC_TRAIN_RUN_DIR") and not (code in GO_ON_LATER and relay.warned):
        note_exit(env["HPC_TRAIN_RUN_DIR"], returncode, env)
    if code in GO_ON_LATER and relay.warned:
        if is_first:
            _requeue(job, env, code)
        else:
            # A non-zero exit ends the step (--kill-on-bad-exit), signalling every process of rank 0 too,
            # its `scontrol requeue` included: leave rank 0 the time to requeue first. Its own exit then ends
            # the step, and the SIGTERM that brings ends this wait: the requeued job starts again at once.
            relay.wait_for_the_step_to_end(REQUEUE_GRACE_SECONDS)
    return code


def note_exit(run_dir: str, returncode: int, env: Mapping[str, str]) -> None:
    """The rank's note on how its command failed, for the epilogue: a signal (worth a retry) or its own exit code."""
    if returncode < 0:
        name = signal.strsignal(-returncode) or f"signal {-returncode}"
        attempts.note_failure(run_dir, "signal", f"the command was ended by {name}", environ=env, signal=name)
    else:
        attempts.note_failure(run_dir, "exit", f"the command exited with {returncode}", environ=env, code=returncode)


def exit_code(returncode: int) -> int:
    """A process's exit status as a shell reports it: 128 + N when signal N ended it."""
    return 128 - returncode if returncode < 0 else returncode


def _requeue(job: CommandJob, env: Mapping[str, str], code: int) -> None:
    run_dir = Path(env["HPC_TRAIN_RUN_DIR"]) if env.get("HPC_TRAIN_RUN_DIR") else None
    def asking(outcome: RequeueOutcome) -> None:
        _say(f"the command stopped to go on later (exit {code}); {outcome.asking()}: it runs the command again")

    outcome = requeue_stopped(env, job.max_requeues, run_dir, before=asking)
    if outcome.requeued:
        return
    if outcome.problem is None:
        _say(f"the command stopped to go on later (exit {code}); {outcome.says()}")
    else:
        _say(f"{outcome.says()}; resubmit the job to go on")


def _ignore(signals: tuple[signal.Signals, ...], then: Callable[[], None]) -> None:
    for signum in signals:
        signal.signal(signum, signal.SIG_IGN)
    then()


class Relay:
    """Signal handlers: note a warning, have it passed on as the signal the command expects, and outlive the others.

    The handlers only note (a handler interrupts the main thread anywhere, a lock held included); a thread started
    with the command passes each warning on, once the command catches it (warninghold.py)."""

    def __init__(self, warning_to_command: signal.Signals) -> None:
        self.child: subprocess.Popen[bytes] | None = None
        self.warned = False
        self.warning_to_command = warning_to_command
        self.step_ending = False  # a SIGTERM after the command had ended: the step is being ended
        self.to_pass_on = False  # a warning noted, not yet passed on to the command

    def wait_for_the_step_to_end(self, at_most: float) -> None:
        """Sleep until the step's SIGTERM arrives, or `at_most` seconds."""
        deadline = time.monotonic() + at_most
        while not self.step_ending and time.monotonic() < deadline:
            time.sleep(0.05)

    def install(self, signals: Iterable[signal.Signals]) -> None:
        for signum in signals:
            signal.signal(signum, self._note)

    def attach(self, child: subprocess.Popen[bytes]) -> None:
        """The command, started: its warnings (one that came before it included: it missed Slurm's) passed on by a
        thread of their own until it ends."""
        self.child = child
        threading.Thread(target=self._pass_warnings_on, args=(child,), name="warning-relay", daemon=True).start()

    def _pass_warnings_on(self, child: subprocess.Popen[bytes]) -> None:
        while child.returncode is None:  # (set by the main thread's wait)
            if self.to_pass_on:
                self.to_pass_on = False
                warninghold.pass_on(child, self.warning_to_command, say=_say)
            else:
                time.sleep(warninghold.POLL_SECONDS)

    def _note(self, signum: int, frame: FrameType | None) -> None:
        if signum in WARNINGS:
            self.warned = True
            # USR1 reaches a running USR1 command by itself (Slurm signals every process of the rank); the rest, and
            # a warning that came before the command, is passed on.
            if self.child is None or not (signum == signal.SIGUSR1 == self.warning_to_command):
                self.to_pass_on = True
        if signum == signal.SIGTERM and self.child is not None and self.child.poll() is not None:
            self.step_ending = True


def _say(message: str) -> None:
    print(f"hpc-train: {message}", file=sys.stderr, flush=True)


def supervised_arguments(job: CommandJob) -> list[str]:
    """hpc-train's arguments that run `job` as one rank under the bootstrap (for srun, or for launch)."""
    return ["bootstrap", "--supervise", "--strategy", job.strategy,
            *(("--num-ps", str(job.num_ps)) if job.strategy == "parameter_server" else ()),
            "--max-requeues", str(job.max_requeues),
            *(("--keras", job.keras) if job.keras != "auto" else ()),
            *(("--command-signal", job.command_signal) if job.command_signal != "USR1" else ()),
            "--", *job.command]
