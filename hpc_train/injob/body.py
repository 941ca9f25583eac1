"""One job body: what every batch script hpc-train writes or ships runs, in one line, `hpc-train job ...`.

Whatever wrote the script (the slurm/*.sh job scripts, `render`, a sweep, submit's submitit script), the job
runs the same sequence from here:

0. the run folder's job.json, when nothing wrote one (a job started with sbatch, or run here): every job is
   followed the same way;
1. the attempt's start line (`hpc-train: job J (restart N) on NODES, T tasks; logs and results in RUN_DIR`),
   where the epilogue and the next prologue find where this attempt's part of the job log begins;
2. the prologue (prologue.py), with SIGTERM ignored: it may requeue the job off a node that failed (its 4: the
   attempt ends, exit 0, and Slurm's SIGTERM follows) or end it once the retries are spent (its 3: exit 1);
3. the step: `srun --kill-on-bad-exit=K ...` inside a Slurm job, else the mock launcher (mock_srun.py) on this
   machine, with the job's nodes and tasks; USR1 and USR2 sent to this process (`--signal=B:...`,
   `scancel --batch --signal=...`) are passed on to it;
4. after a failed step, the epilogue (epilogue.py), with SIGTERM ignored again: a retry requeues the job, and
   this process has more to do after the SIGTERM that follows;
5. the attempt's end into state.json (a user's command that succeeded: finished), for status once Slurm forgot
   the job; the exit code: the step's, or 0 when the epilogue retried the job (or its chief finished).

A prologue or epilogue that fails by itself changes nothing (a warning): the step runs, its code stands.
A tracked job's MLflow run is held around the step and ended as the attempt ends (tracked.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from hpc_train.bootstrap.tmpdir import task_epilog
from hpc_train.errors import HpcTrainError, report
from hpc_train.exitcodes import EXIT_RETRIES_SPENT
from hpc_train.injob.dataservice import serving_data
from hpc_train.injob.dataservice import start_words as service_words
from hpc_train.injob.jobline import USAGE, JobBody, parse, trainers_setting
from hpc_train.injob.prologue import EXIT_MOVED
from hpc_train.injob.onterm import ending_on_term
from hpc_train.injob.servicecomponent import ranks_view, srun_environ
from hpc_train.injob.ledgered import after_the_attempt, components_of, ledgered_step
from hpc_train.injob.sizing import (attempt_size, het_step_arguments, rank_environment, start_words,
                                    step_size_arguments, with_step_tasks)
from hpc_train.injob.started_with_sbatch import JobShape, record_job
from hpc_train.injob.tracked import tracked_attempt
from hpc_train.injob.trial import requeues_done, settle_trial
from hpc_train.runs.attempts import close_unended, note_tasks, record_end
from hpc_train.runs.folders import nodes_and_tasks
from hpc_train.runs.goodput import ATTEMPT_VARIABLE
from hpc_train.runs.requeue import restart_count
from hpc_train.slurm.client import SlurmClient
from hpc_train.version import PREFIX

# Signals a batch script passes on to its step: Slurm's time-limit warning when it reaches the script itself.
PASSED_ON = (signal.SIGUSR1, signal.SIGUSR2)


def kill_on_bad_exit(strategy: str) -> int:
    """srun's --kill-on-bad-exit: a lost MultiWorkerMirrored task stalls the rest, so it ends the step; a
    parameter-server chief carries on without a lost worker, so that does not (pure)."""
    return 0 if strategy == "parameter_server" else 1


def start_line(body: JobBody, env: Mapping[str, str]) -> str:
    """The attempt's first line in the job log (pure)."""
    from hpc_train.runs.folders import job_id_of

    restarts = restart_count(env)
    again = f" (restart {restarts})" if restarts else ""
    sized = attempt_size(body.node_range, body.tasks_per_node, env)
    nodes, tasks = nodes_and_tasks(with_step_tasks(env, sized, body.tasks_per_node),
                                   (sized[0] if sized else body.nodes) * body.tasks_per_node, job_components(env))
    return (f"{PREFIX}: job {job_id_of(body.run_dir, env)}{again} on {nodes}, {tasks} tasks{start_words(sized)}"
            f"{service_words(body)}; logs and results in {body.run_dir}")


def srun_arguments(body: JobBody, rank_command: Sequence[str], components: int = 1,
                   options: Sequence[str] = (), sized: tuple[int, Any] | None = None) -> list[str]:
    """srun's arguments for the step under Slurm (pure). Without rank logs, srun labels each rank's lines.
    A heterogeneous job's (`components` > 1) step spans every component (a plain srun there runs component 0's
    tasks only): one step, SLURM_PROCID counting across them, which the bootstrap reads (bootstrap/hetstep.py).
    `options`: srun's own, before the command (Pyxis's --container-*)."""
    if components > 1:
        common = [f"--kill-on-bad-exit={kill_on_bad_exit(body.strategy)}", *options, *([] if body.output else
                                                                                        ["--label"])]
        command = rank_logs_by_procid(body, rank_command) if body.output else list(rank_command)
        if sized is not None:  # a range of workers: each component its own options, the workers' sized
            return [*het_step_arguments(components, sized, body.tasks_per_node, common), *command]
        return [f"--het-group={','.join(map(str, range(components)))}", *common, *command]
    return [*step_size_arguments(sized, body.tasks_per_node), *(() if body.output else ("--label",)),
            f"--kill-on-bad-exit={kill_on_bad_exit(body.strategy)}",
            *(("--open-mode=append", f"--output={body.output}") if body.output else ()),
            *((f"--error={body.error}",) if body.error else ()), *options, *rank_command]


# Each rank appends to its own log, named by its SLURM_PROCID (%t in the patterns), from inside the rank.
_OWN_LOGS = ('out=${1//%t/$SLURM_PROCID}; err=${2//%t/$SLURM_PROCID}; shift 2; '
             'if [ -n "$err" ]; then exec "$@" >>"$out" 2>>"$err"; else exec "$@" >>"$out" 2>&1; fi')


def rank_logs_by_procid(body: JobBody, rank_command: Sequence[str]) -> list[str]:
    """The rank command, writing its own log (pure). In a heterogeneous step Slurm 22.05's %t in srun --output is
    not the rank (component 1's start one too high, docs/bootstrap.md), so each rank names its log itself."""
    return ["bash", "-c", _OWN_LOGS, "rank-log", body.output or "", body.error or "", *rank_command]


def job_components(env: Mapping[str, str]) -> int:
    """The components of the job this batch shell runs (SLURM_HET_SIZE; 1 for a plain job) (pure)."""
    size = env.get("SLURM_HET_SIZE", "")
    return int(size) if size.isdigit() and int(size) > 1 else 1


def under_slurm(env: Mapping[str, str]) -> bool:
    """A Slurm job with srun at hand; else the step runs here, on the mock launcher."""
    return bool(env.get("SLURM_JOB_ID")) and shutil.which("srun", path=env.get("PATH")) is not None


def exit_status(returncode: int) -> int:
    """A child's exit as a shell's $? says it: 128 + N for a child killed by signal N (pure)."""
    return 128 - returncode if returncode < 0 else returncode


@contextmanager
def ignoring_term() -> Iterator[None]:
    """SIGTERM ignored meanwhile (and by what is started meanwhile), as a script's `trap '' TERM`."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def prologue(body: JobBody, env: Mapping[str, str]) -> int | None:
    """Before the step: the job's exit code when this attempt ends here, else None (the step runs)."""
    from hpc_train.injob.prologue import before_the_step  # (looked up at the call: tests replace it)

    if not env.get("SLURM_JOB_ID"):  # not a Slurm job: no attempts to account for, but a range's size (as Slurm's)
        _quietly(lambda: note_size_here(body, env), "recording the attempt's size", 0)
        return None
    with ignoring_term():
        said = _quietly(lambda: before_the_step(body.run_dir, env, body.max_retries), "the prologue", 0)
    return {EXIT_RETRIES_SPENT: 1, EXIT_MOVED: 0}.get(said)


def note_size_here(body: JobBody, env: Mapping[str, str]) -> int:
    """A node range run here (--local, bash job.sbatch): its one attempt's size into state.json, as the prologue
    records a Slurm attempt's, so that status says it; 0."""
    from hpc_train.runs.attempts import note_size
    from hpc_train.runs.state import STATE_FILE, read_state, write_json_atomically

    sized = attempt_size(body.node_range, body.tasks_per_node, env)
    if sized:
        state = read_state(body.run_dir)
        write_json_atomically(body.run_dir / STATE_FILE, {**state, **note_size(state, 1, sized[0], str(sized[1]))})
    return 0


def epilogue(body: JobBody, code: int, env: Mapping[str, str], go_on: list[dict[str, str]] | None = None) -> int:
    """After a failed step: the job's exit code (0 once it is requeued for a retry, or retried in its allocation:
    `go_on` then holds the next attempt's environment, shrink.py); the step's if it fails."""
    from hpc_train.injob.epilogue import after_the_step

    # Ignored to the end, not only meanwhile: a retry's requeue brings Slurm's SIGTERM while this still writes.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return _quietly(lambda: after_the_step(code, body.run_dir, body.strategy, env, body.max_retries,
                                           set(body.retry_exit_codes), body.command,
                                           None if go_on is None else go_on.append), "the epilogue", code)


def requeued_for_a_rank(body: JobBody, code: int) -> int:
    """0 once the job is requeued for a rank in an image that asked (it has no scontrol there: requeue.py), else
    the step's `code`. Slurm's SIGTERM follows the requeue: ignored, this process has the attempt's end to write."""
    from hpc_train.runs.requeue import asked_by_a_rank, requeue

    job_id = asked_by_a_rank(body.run_dir)
    if job_id is None:
        return code
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    problem = requeue(job_id)
    if problem is not None:
        from hpc_train.runs import attempts

        with contextlib.suppress(OSError):  # (the history is best effort: the step's code still goes back)
            attempts.withdraw_newest_requeue(body.run_dir)  # the rank recorded it on asking: it did not happen
        print(f"{PREFIX}: scontrol requeue {job_id} failed ({problem}); resubmit the job to resume", file=sys.stderr,
              flush=True)
        return code
    return 0


def _quietly(call: Callable[[], int], what: str, otherwise: int) -> int:
    """call(), or `otherwise` with a one-line warning when it fails by itself (a bug must not change the job)."""
    try:
        return call()
    except Exception as error:  # noqa: BLE001 - anything: the job goes on as if it had not run
        print(f"{PREFIX}: warning: {what} failed ({type(error).__name__}: {error}); the job goes on without it",
              file=sys.stderr, flush=True)
        return otherwise


def watched_step(body: JobBody, rank_command: Sequence[str], env: Mapping[str, str]) -> int:
    """The step, with the hang watchdog beside it (watchdog.py): it ends a step on which no rank makes progress."""
    from hpc_train.injob.watchdog import Watch, Watchdog, trainers_startup
    from hpc_train.utilization.watch import watch_idle

    step: list[Any] = []  # srun's process once started (under Slurm); the watchdog ends it
    said = trainers_setting(rank_command, "startup_timeout")  # the rendezvous' (a command's: the default)
    startup = None if body.command else trainers_startup(rank_command, said)
    watch = Watch(body.run_dir, body.hang_minutes, body.command, restart_count(env) + 1, startup)
    here = not under_slurm(env)
    dog = Watchdog(watch, lambda: end_step(step, here), say=lambda line: print(line, file=sys.stderr, flush=True))
    dog.start()  # (not with hang_minutes 0: off)
    idle = watch_idle(body.run_dir, env)  # the job's GPUs that idle, said in the job's log (utilization/watch.py)
    try:
        return run_step(body, rank_command, env, step)
    finally:
        dog.stop()
        idle.stop()


def end_step(step: Sequence[Any], here: bool) -> None:
    """End a hung step: srun's (which ends its tasks), else, `here`, the mock launcher's, which runs in this
    process and stops its ranks on SIGTERM. srun is signalled through its Popen, which never signals a process
    it already reaped (its pid may be another's by then); SIGKILL a minute later if it still runs."""
    import threading

    if here:
        return _signal(os.getpid(), signal.SIGTERM)
    if not step:
        return  # srun never started: nothing to end

    def end() -> None:
        for signum, then in ((signal.SIGTERM, 3.0), (signal.SIGTERM, 60.0), (signal.SIGKILL, 0.0)):
            if step[0].poll() is not None:
                return
            step[0].send_signal(signum)  # a second TERM: srun ends the step at once, as a second Ctrl-C
            time.sleep(then)

    threading.Thread(target=end, name="hpc-train end step", daemon=True).start()


def run_step(body: JobBody, rank_command: Sequence[str], env: Mapping[str, str],
             step: list[Any] | None = None) -> int:
    """The step's exit status: srun under Slurm, else the mock launcher; USR1/USR2 passed on to it. `step`
    receives srun's process once it started. With a container, each rank's command runs in its image."""
    try:
        options, rank_command = contained(body, rank_command, env)
    except HpcTrainError as error:  # an image the ranks cannot start in: one line
        return report(error, PREFIX)
    if not under_slurm(env):
        from hpc_train.injob.mock_srun import Step, launch

        try:
            sized = attempt_size(body.node_range, body.tasks_per_node, env)  # a range: as many as this machine holds
            step = Step.make(sized[0] if sized else body.nodes, body.tasks_per_node, gpus_per_node=body.gpus_per_node,
                             strategy=body.strategy, num_ps=body.num_ps)
            return launch(step, rank_command, env,  # (it passes them on)
                          kill_on_bad_exit=bool(kill_on_bad_exit(body.strategy)))
        except HpcTrainError as error:  # a command that cannot start: one line, as `hpc-train launch` says it
            return report(error, "hpc-train launch")

    step = [] if step is None else step
    early: list[int] = []  # a warning that came before srun started: passed on once it has

    def pass_on(signum: int, frame: Any) -> None:
        if step:
            _signal(step[0].pid, signum)
        else:
            early.append(signum)

    previous = {signum: signal.signal(signum, pass_on) for signum in PASSED_ON}
    try:
        sized = attempt_size(body.node_range, body.tasks_per_node, env)
        # Each rank's own TMPDIR removed by slurmstepd after the rank, however it ended (bootstrap/tmpdir.py).
        options = [f"--task-epilog={task_epilog(body.run_dir.resolve())}", *options]
        step.append(SlurmClient.local(srun_environ(env)).start_step(srun_arguments(body, rank_command,
                                                                                  job_components(env), options, sized)))
        for signum in early:
            _signal(step[0].pid, signum)
        return exit_status(step[0].wait())
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def contained(body: JobBody, rank_command: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """(srun's own options, the ranks' command): in the body's container when it has one (Pyxis's under srun only)."""
    if body.container is None:
        return [], list(rank_command)
    from hpc_train.injob.contained import container_step, refuse_outside_srun

    refuse_outside_srun(body.container, under_slurm(env))
    return container_step(body.container, body.run_dir, rank_command, env)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass  # it ended meanwhile


def nodes_held(body: JobBody, env: Mapping[str, str]) -> int:
    """The nodes this attempt holds: its size in a node range, a heterogeneous job's components', Slurm's count,
    else the body's (pure)."""
    sized = attempt_size(body.node_range, body.tasks_per_node, env)
    count = env.get("SLURM_JOB_NUM_NODES", "")
    return sized[0] if sized else sum(components_of(env)) or (int(count) if count.isdigit() else body.nodes)


def run_job(body: JobBody, rank_command: Sequence[str], environ: Mapping[str, str]) -> int:
    """The whole sequence (see the module's docstring), once per attempt in this allocation: a node range's retry
    goes on here on the nodes it kept (shrink.py), with the resized job's variables; the job's exit code."""
    from hpc_train.injob.shrink import counted_restarts
    from hpc_train.runs.attempts import history

    env = ranks_view(environ, body.data_service)  # (the data service's own component aside: servicecomponent.py)
    while True:
        go_on: list[dict[str, str]] = []
        code = run_attempt(body, rank_command, counted_restarts(env, environ, history(body.run_dir)), go_on)
        if not go_on:
            return code
        env = go_on[0]
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # (the epilogue ignored it to its end)


def run_attempt(body: JobBody, rank_command: Sequence[str], environ: Mapping[str, str],
                go_on: list[dict[str, str]] | None = None) -> int:
    """One attempt; its exit code. `go_on` receives the next attempt's environment when it runs in this allocation."""
    from hpc_train.runs.secret import PRIVATE_FOLDER, secret_environ

    body.run_dir.mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER)
    shape = JobShape.of(body, rank_command, under_slurm(environ))
    _quietly(lambda: record_job(body.run_dir, shape, environ, time.time()) or 0, "writing job.json", 0)
    # The run folder for a command's own checkpoints and outputs, every rank's the same absolute folder; the
    # job's secret for the check-in (its file's path, made now unless a previous attempt made it).
    # The attempt's number for the ranks' ledger too: Slurm's restart count misses retries in an allocation (shrink.py).
    env = {**environ, "HPC_TRAIN_RUN_DIR": str(body.run_dir.resolve()), **secret_environ(body.run_dir),
           **rank_environment(attempt_size(body.node_range, body.tasks_per_node, environ)),
           ATTEMPT_VARIABLE: str(restart_count(environ) + 1)}
    print(start_line(body, env), file=sys.stderr, flush=True)
    sized = attempt_size(body.node_range, body.tasks_per_node, env)
    nodes, tasks = nodes_and_tasks(with_step_tasks(env, sized, body.tasks_per_node),
                                   (sized[0] if sized else body.nodes) * body.tasks_per_node, job_components(env))
    attempt_here = (body.run_dir, restart_count(env) + 1, nodes, time.time())  # (its end: record_end)
    if env.get("SLURM_JOB_ID"):  # (as the prologue: a Slurm job's attempts)
        close_unended(body.run_dir)  # the previous attempt's end, if its body was killed with it
    ended = prologue(body, env)
    if ended is None and env.get("SLURM_JOB_ID"):
        note_tasks(body.run_dir, tasks)
    requeues = requeues_done(body.run_dir)
    if ended is None and under_slurm(env):  # Slurm's SIGTERM ends this process: its end recorded first
        signal.signal(signal.SIGTERM, ending_on_term(attempt_here, requeues, tasks, env.get("SLURM_JOB_ID")))
    with tracked_attempt(body, env, ended, under_slurm(env)) as attempt:  # the job's MLflow run, when it has one
        if ended is not None:
            record_end(*attempt_here, ended, ended == 0, tasks=tasks)
            after_the_attempt(body.run_dir, env)
            return settle_trial(body.run_dir, ended, ended == 0)  # 0: moved off a failed node, requeued
        with ledgered_step(body.run_dir, env, attempt_here[1], nodes_held(body, env), body.gpus_per_node,
                           body.command, attempt_here[3]), \
                serving_data(body, attempt.env, attempt_here[1], under_slurm(env)) as step_env:  # (dataservice.py)
            code = watched_step(body, rank_command, step_env)
        final = requeued_for_a_rank(body, code)  # (the chief that asked exits 0, as one that requeued itself)
        final = epilogue(body, code, env, go_on) if final != 0 else 0
        # A retry (epilogue's 0 after a failed step) or a requeue goes on in the same trial: nothing to tell yet.
        goes_on = (code != 0 and final == 0) or requeues_done(body.run_dir) > requeues
        record_end(*attempt_here, final, goes_on, finished=body.command and code == 0 and not goes_on, tasks=tasks)
        after_the_attempt(body.run_dir, env)
        attempt.ended(code, final)
    return settle_trial(body.run_dir, final, goes_on)


def main(argv: list[str] | None = None) -> int:
    """`hpc-train job [options] -- COMMAND ...` (hidden: batch scripts run it, not people)."""
    try:
        body, command = parse(sys.argv[1:] if argv is None else argv, os.environ, time.time())
    except ValueError:
        print(USAGE, file=sys.stderr)
        return 2
    except HpcTrainError as error:  # an image no runtime is named for
        return report(error, PREFIX)
    return run_job(body, command, os.environ)


if __name__ == "__main__":
    sys.exit(main())
