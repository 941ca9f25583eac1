"""How a training run ends: finished, stopped (and requeued on the time-limit warning), pruned, lost contact with
a peer, or refused; the note each failure leaves in the run's history; and leaving at once when all is saved.

The chief records every end in `state.json`. A stop, a requeue and pruning
come after every rank has saved the same step (callbacks.py); the process then
leaves at once (`leave_now`), since TensorFlow's teardown after a stop can
outlast Slurm's KillWait. A job's rank whose run is over leaves at once too
(`leave_when_done`): that teardown would hold the job's allocation for nothing.
A failure leaves its note for the epilogue (runs/attempts.py), which decides
from it whether the job is retried.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from hpc_train.bootstrap.stderr_filter import drain
from hpc_train.config import TrainConfig
from hpc_train.errors import HpcTrainError
from hpc_train.exitcodes import EXIT_LOST_PEER, EXIT_STOPPED
from hpc_train.runs import attempts
from hpc_train.runs.goodput import add_to_measures
from hpc_train.runs.metrics import metrics_path
from hpc_train.runs.requeue import RequeueOutcome, requeue_stopped
from hpc_train.runs.state import write_state
from hpc_train.training.lines import Say, log
from hpc_train.training.paths import RunPaths
from hpc_train.training.progress import Progress
from hpc_train.training.rank import RankInfo, closed_peers, lost_peers
from hpc_train.training.rendezvous import PeersMissing, wait_for_departures
from hpc_train.training.stopping import StopKind, StopSignals
from hpc_train.training.usertask import TaskError, TaskModule, UserCodeError, final_metrics

# How long the other ranks wait before exiting on a mistake in the task module, so the chief reports it first.
CHIEF_TELLS_SECONDS = 3.0


class LostContact(HpcTrainError):
    """A peer died or froze under us: worth a retry on other nodes (not a refusal: its own exit code)."""

    exit_code = EXIT_LOST_PEER

    def __init__(self, message: str, lost: str, hosts: tuple[str, ...]) -> None:
        super().__init__(message)
        self.lost = lost  # "worker 1", "ps 0"
        self.hosts = hosts  # where they ran: the nodes to blame


@contextmanager
def noting_failures(output_dir: str | Path, rank: RankInfo) -> Iterator[None]:
    """Leave a failure's note in the run's history, for the epilogue to decide on a retry; the error goes on."""
    try:
        yield
    except (TaskError, UserCodeError) as error:
        attempts.note_failure(output_dir, "task_error", str(error))  # would fail again: never retried
        # Every rank meets the same mistake in the task module at about the same moment, and the first to exit
        # makes srun end the others: let the chief, whose log people read, be the one that tells it.
        if rank.cluster and not rank.is_chief:
            time.sleep(CHIEF_TELLS_SECONDS)
        raise
    except LostContact as error:
        attempts.note_failure(output_dir, "lost_peer", str(error), error.hosts, lost=error.lost)
        raise
    except PeersMissing as error:
        attempts.note_failure(output_dir, "lost_peer", str(error), lost="a peer at start")
        raise
    except HpcTrainError as error:
        attempts.note_failure(output_dir, "refused", str(error))
        raise


def in_fit(error: Exception, rank: RankInfo, paths: RunPaths, environ: Mapping[str, str] = os.environ) -> Exception:
    """What a TensorFlow error out of `fit` means for the job: a peer lost (lost_contact), a task's dataset that
    asserts its length while the data service's workers each read a share of it (served_share), else itself."""
    from hpc_train.training.keras import tf

    if isinstance(error, (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.DeadlineExceededError)):
        return lost_contact(error, rank, paths)
    return served_share(str(error), environ) or error


def served_share(message: str, environ: Mapping[str, str]) -> TaskError | None:
    """A dataset's assert_cardinality failing through the data service (pure): with 2 or more workers each makes a
    share of the dataset's elements (distributed_epoch), so a length asserted inside it never holds. One line, the
    fix; None for any other error."""
    if "was expected to contain" not in message or not environ.get("HPC_TRAIN_DATA_SERVICE"):
        return None  # (one worker makes every element; `auto` may have added more since the attempt began)
    said = next((line.strip() for line in message.splitlines() if "was expected to contain" in line), "")
    one = environ.get("HPC_TRAIN_DATA_SERVICE_WORKERS", "") == "1"  # (at the attempt's start: auto may add more)
    return TaskError(f"the task's dataset asserts its length ({said[:120]}), and through the data service each data "
                     "worker makes only its share of it: take assert_cardinality out of the dataset (steps_per_epoch "
                     "sets an epoch's length)" + ("" if one else ", or run with --data-workers 1"))


def lost_contact(error: Exception, rank: RankInfo, paths: RunPaths,
                 probe: Callable[[RankInfo], list[str]] = closed_peers) -> LostContact:
    """One line for a rank that died under us: who, and how to go on (a traceback says neither).

    Who: the peers whose port is closed now (`probe`), else those TensorFlow's message names."""
    message = str(error)
    peers = probe(rank) or lost_peers(message, rank)
    who = ", ".join(peers) if peers else "another task of the job"
    detail = next((line.strip() for line in message.splitlines() if "UNAVAILABLE" in line or "aborted" in line),
                  message.strip().splitlines()[0] if message.strip() else type(error).__name__)
    return LostContact(f"lost contact with {who} ({detail[:160]}); the job cannot go on without it: it is retried "
                       f"on other nodes if it may be, else run it again to resume from the last checkpoint in "
                       f"{paths.checkpoints}", ", ".join(peer.split(" at ")[0] for peer in peers) or "a peer",
                       tuple(dict.fromkeys(peer.split(" at ")[1].rsplit(":", 1)[0] for peer in peers)))


def stopped(stop: Any, config: TrainConfig, progress: Progress, paths: RunPaths, signals: StopSignals,
            say: Say) -> int:
    """Every rank saved at the same step; the chief records it and requeues the job if it was warned.

    `stop`: the callbacks' StoppedEarly (its kind and checkpoint). Returns the process's exit code.
    """
    rank = paths.rank
    cause = signals.signal_name or "another task's stop request"
    log(rank, f"stopped by {cause} {progress.describe()}; checkpoint {stop.checkpoint}")
    if not rank.is_chief:
        wait_for_the_chiefs_record(rank, paths, progress.global_step)
        return 0  # not an error: a non-zero exit could make srun kill the chief before it is done
    details = {**progress.position(), "signal": cause, "checkpoint": stop.checkpoint}
    if stop.kind is not StopKind.WARNING:
        write_state(paths.output, "stopped", **details)
        say(f"stopped {progress.describe()} by {cause} and saved {stop.checkpoint}; running the job again resumes "
            "there")
        return EXIT_STOPPED

    def leaving(asking: RequeueOutcome) -> None:
        write_state(paths.output, "requeued", **details)
        let_workers_leave(rank)
        say(f"stopped {progress.describe()} and saved {stop.checkpoint}; {asking.asking()}: it resumes from there")

    outcome = requeue_stopped(os.environ, config.max_requeues, paths.output, progress.global_step, leaving)
    if outcome.requeued:
        return 0
    why_not = outcome.reason if outcome.problem is None else f"{outcome.says()}; resubmit it to resume"
    write_state(paths.output, "stopped", **details, not_requeued=why_not)
    say(f"stopped {progress.describe()} and saved {stop.checkpoint}; not requeued: {why_not}")
    return EXIT_STOPPED


def ended_at_once(paths: RunPaths) -> Callable[[str, str], None]:
    """What the chief records when the stop watcher ends its process at once (stopping.py): the run stopped, with
    nothing saved since its last checkpoint. Without it, state.json would still say the run is running."""
    def record(signal_name: str, line: str) -> None:
        if paths.rank.is_chief:
            write_state(paths.output, "stopped", signal=signal_name, checkpoint=None,
                        reason=line.removeprefix("hpc-train: "))
    return record


def pruned(verdict: Any, config: TrainConfig, progress: Progress, paths: RunPaths, say: Say) -> int:
    """Every rank saved and stopped at a rung (`verdict`: the callbacks' Pruned); the chief records why."""
    if paths.rank.is_chief:
        write_state(paths.output, "pruned", epoch=verdict.epoch, reason=verdict.reason,
                    checkpoint=verdict.checkpoint, **progress.position())
        say(f"pruned after epoch {verdict.epoch}/{config.epochs}: {verdict.reason}; checkpoint {verdict.checkpoint} "
            "kept; its nodes go to the elements still waiting")
    else:
        wait_for_the_chiefs_record(paths.rank, paths, progress.global_step)
    return 0


def finished(model: Any, config: TrainConfig, user_task: TaskModule, paths: RunPaths, report: Any,
             say: Say) -> None:
    """Save the model (every rank takes part), and on the chief record the task's final figures.

    `report`: the callbacks' EpochReport, which writes metrics.json with the final figures in its totals.
    """
    began = time.perf_counter()
    save_model_atomically(model, paths.model)
    saved = time.perf_counter() - began
    log(paths.rank, f"finished; weights digest {weights_digest(model.get_weights())}")
    if not paths.rank.is_chief:
        return
    began = time.perf_counter()
    final = (final_metrics(user_task, model, config) if user_task.has("final_metrics")
             else last_validation(report.epochs))
    # The final model's save and evaluation, into the goodput ledger's measures (runs/goodput.py).
    add_to_measures(paths.output, os.environ, checkpoint=saved, evaluation=time.perf_counter() - began)
    report.write(final)
    write_state(paths.output, "finished", epochs=config.epochs, **final)
    (paths.output / attempts.PROGRESS_FILE).unlink(missing_ok=True)  # for a failure's steps redone: none now
    shown = ", ".join(f"{name} {value:.4f}" if isinstance(value, float) else f"{name} {value}"
                      for name, value in final.items())
    say(f"done{': ' + shown if shown else ''}; model {paths.model}, metrics {metrics_path(paths.output)}")


def last_validation(epochs: list[dict[str, Any]]) -> dict[str, Any]:
    """The final figures of a task without final_metrics(): the last epoch's validation figures."""
    last = epochs[-1] if epochs else {}
    return {f"final_{name}": value for name, value in last.items() if name.startswith("val_")}


def leave_now(code: int, paths: RunPaths) -> NoReturn:
    """End the process at once: everything is saved, and TensorFlow's teardown after a stop can wait
    for seconds (a worker's input iterator waits on the chief that has left), beyond Slurm's KillWait."""
    paths.remove_scratch()
    sys.stdout.flush()
    drain()  # os._exit skips atexit: the stderr filter gets its last lines now
    os._exit(code)


def leave_when_done(code: int, environ: Mapping[str, str]) -> int:
    """A job's rank whose run is over (everything saved, written and closed; its own TMPDIR removed) ends at once
    with `code`, without Python's and TensorFlow's teardown: seconds a rank (7 s on a loaded 2-core machine, against
    0.3 s), in which the job holds its allocation with nothing left to do (the ledger's `idle`). Outside a job (no
    HPC_TRAIN_RUN_DIR, which the job body gives its ranks: `hpc-train train` by hand, a caller in this process)
    `code` is returned, and the process ends as usual."""
    if not environ.get("HPC_TRAIN_RUN_DIR"):
        return code
    sys.stdout.flush()
    drain()  # os._exit skips atexit: the stderr filter gets its last lines now
    os._exit(code)


def wait_for_the_chiefs_record(rank: RankInfo, paths: RunPaths, step: int, timeout: float = 20.0) -> None:
    """A MultiWorkerMirrored worker that stopped stays until the chief has recorded the stop at `step`: the chief's
    side of the last all-reduce (the stop's barrier) may still be reading from this process, and a worker gone first
    fails it ("Socket closed": the chief then takes the stop for a lost peer). The chief records it before it waits
    for the workers to leave (let_workers_leave), so this never waits on a chief waiting on it; `timeout` bounds it."""
    if not rank.cluster or "chief" in rank.cluster:
        return  # (parameter-server ranks stop with their chief, not in fit)
    from hpc_train.runs.state import read_state

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = read_state(paths.output)
        if state.get("state") in ("stopped", "requeued", "pruned") and state.get("global_step") == step:
            return
        time.sleep(0.1)


def let_workers_leave(rank: RankInfo, timeout: float = 30.0) -> None:
    """Requeueing ends the job's processes: let the other MultiWorkerMirrored workers exit first.

    (Parameter-server ranks, on the contrary, wait for the chief to leave.)
    """
    if rank.cluster and "chief" not in rank.cluster:
        staying = wait_for_departures(rank, timeout)
        if staying:
            log(rank, f"{', '.join(staying)} still running after {timeout:.0f} s; requeueing anyway")


def save_model_atomically(model: Any, path: Path) -> None:
    """Save beside, then rename: an interrupted save never replaces a good model file with half of one."""
    partial = path.with_name(f".partial-{path.name}")  # Keras insists on the .keras ending
    model.save(partial)
    os.replace(partial, path)


def weights_digest(weights: list[Any]) -> str:
    """A short fingerprint of a model's weights: equal on every worker of a synchronous run."""
    digest = hashlib.sha256()
    for array in weights:
        digest.update(array.tobytes())
    return digest.hexdigest()[:16]
