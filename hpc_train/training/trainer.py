"""One training run, for any strategy and any task module: model, data, resume, fit, chief's outputs, exit.

What is trained comes from the task module (`task`, usertask.py): the built-in
MNIST one or a user's. The run loop knows nothing of any of them.

Only the chief writes checkpoints, TensorBoard logs, the final model and
metrics.json under `output_dir`. Other MultiWorkerMirrored workers take part in
every save (a save may need all of them) but write into their own scratch
directory, which is removed at the end. Parameter-server ps and worker ranks
run a server until the chief has finished, then exit 0.

Nothing finished is lost: a checkpoint after every epoch, and one at the next
step boundary when Slurm warns of the time limit (USR1, USR2) or stops the job
(TERM). A warned job requeues itself and resumes at that very step, with the
batch that was next (progress.py, and the task's own seeking, as tasks/mnist/pipeline.py does). The chief keeps `state.json`
saying whether the run is running, stopped, requeued or finished.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from hpc_train.config import TrainConfig, applying_settings
from hpc_train.errors import HpcTrainError
from hpc_train.training.rank import RankInfo, lost_peers, prepare_rank
from hpc_train.training.memory import keep_freed_memory
from hpc_train.training.progress import Progress, remaining_stretches
from hpc_train.training.stderr_filter import drain
from hpc_train.training.rendezvous import PeersMissing, meet, wait_for_departures
from hpc_train.runs import attempts
from hpc_train.runs.metrics import metrics_path
from hpc_train.injob.requeue import requeue_stopped
from hpc_train.runs.state import layout_changes, read_state, write_state
from hpc_train.exitcodes import EXIT_LOST_PEER, EXIT_STOPPED
from hpc_train.training.stopping import StopKind, StopSignals
from hpc_train.training.threads import size_inter_op_pool
from hpc_train.training.usertask import TaskError, TaskModule, UserCodeError, load_task

# How long the other ranks wait before exiting on a mistake in the task module, so the chief reports it first.
CHIEF_TELLS_SECONDS = 3.0


class LostContact(HpcTrainError):
    """A peer died or froze under us: worth a retry on other nodes (not a refusal: its own exit code)."""

    exit_code = EXIT_LOST_PEER

    def __init__(self, message: str, lost: str, hosts: tuple[str, ...]) -> None:
        super().__init__(message)
        self.lost = lost  # "worker 1", "ps 0"
        self.hosts = hosts  # where they ran: the nodes to blame


@dataclass(frozen=True)
class RunPaths:
    """Where this rank writes: the output directory for the chief, scratch for the others."""

    output: Path
    rank: RankInfo

    @property
    def writes(self) -> Path:
        if self.rank.is_chief:
            return self.output
        return self.output / ".scratch" / f"{self.rank.type}-{self.rank.index}"

    @property
    def checkpoints(self) -> Path:
        return self.output / "checkpoints"  # every rank restores from the chief's

    def remove_scratch(self) -> None:
        if not self.rank.is_chief:
            shutil.rmtree(self.writes, ignore_errors=True)
            _remove_if_empty(self.writes.parent)


def run(config: TrainConfig, user_task: TaskModule | None = None) -> int:
    """Train as this rank's role asks; return the process's exit code.

    `user_task`: the task's functions, when given directly (hpc_train.fit); else `config.task` is imported.
    """
    # First of all: Slurm's warning signal would otherwise end a rank that is still starting.
    signals = StopSignals().install()
    if config.tune_malloc:
        keep_freed_memory()  # before TensorFlow allocates: 2x the images/s without oneDNN (memory.py)
    rank = prepare_rank(config)  # before TensorFlow starts: it may set CUDA_VISIBLE_DEVICES
    size_inter_op_pool(config.inter_op_threads, config.strategy)  # before TensorFlow starts (threads.py)
    try:
        return _run(config, rank, user_task, signals)
    except (TaskError, UserCodeError) as error:
        attempts.note_failure(config.output_dir, "task_error", str(error))  # would fail again: never retried
        # Every rank meets the same mistake in the task module at about the same moment, and the first to exit
        # makes srun end the others: let the chief, whose log people read, be the one that tells it.
        if rank.cluster and not rank.is_chief:
            time.sleep(CHIEF_TELLS_SECONDS)
        raise
    except LostContact as error:
        attempts.note_failure(config.output_dir, "lost_peer", str(error), error.hosts, lost=error.lost)
        raise
    except PeersMissing as error:
        attempts.note_failure(config.output_dir, "lost_peer", str(error), lost="a peer at start")
        raise
    except HpcTrainError as error:
        attempts.note_failure(config.output_dir, "refused", str(error))
        raise


def _run(config: TrainConfig, rank: RankInfo, user_task: TaskModule | None, signals: StopSignals) -> int:
    # Every rank imports the task module before meeting the others: one that cannot be used fails them all at once.
    user_task = user_task or load_task(config.task)
    if rank.cluster:
        meet(rank, config.startup_timeout)  # fail fast, naming who is missing, rather than wait in TensorFlow
    if config.strategy == "parameter_server" and rank.type != "chief":
        from hpc_train.training.servers import serve_until_chief_leaves

        return serve_until_chief_leaves(rank, signals, config.startup_timeout)
    paths = RunPaths(Path(config.output_dir), rank)
    try:
        return _train(config, rank, user_task, paths, signals)
    finally:
        paths.remove_scratch()


def _train(config: TrainConfig, rank: RankInfo, user_task: TaskModule, paths: RunPaths, signals: StopSignals) -> int:
    from hpc_train.training import inputs
    from hpc_train.training.callbacks import EpochReport, Pruned, StoppedEarly
    from hpc_train.training.checkpoints import StepSaver
    from hpc_train.training.keras import tf
    from hpc_train.training.strategy import gpus_unused_note, make_strategy

    strategy = make_strategy(config)
    # TensorFlow's coordination service (multi-worker strategies) installs its own SIGTERM handler in C++,
    # which would swallow Slurm's SIGTERM: take the signals back.
    signals.install()
    if note := gpus_unused_note():
        _log(rank, note)
    say = _printer(rank)
    replicas = strategy.num_replicas_in_sync
    global_batch = config.batch_size * replicas
    # Checked the same way on every rank, before any step: a rank that cannot train fails them all at once.
    pipelines = inputs.Pipelines(max(1, rank.num_workers), replicas, config.strategy == "parameter_server")
    # Each pipeline's epoch is built once to be counted and checked (the training stream is built per stretch).
    training_epochs = inputs.EpochDatasets(user_task, config, "train_dataset")
    steps = inputs.epoch_steps(user_task, config, pipelines, training_epochs)
    validation_steps = inputs.validation_steps(user_task, config, pipelines)
    model = _compiled_model(config, strategy, user_task, steps)
    inputs.check_model_fits(user_task, model, training_epochs.get(pipelines.contexts()[0]))
    del training_epochs  # every pipeline's epoch, counted and checked: not held while training
    say(f"{config.strategy}: {_world(rank)}, {replicas} replica(s) in sync; batch {config.batch_size} per replica, "
        f"{global_batch} global; {steps} steps per epoch; {config.precision}")
    described = user_task.call("describe", config=config) if user_task.has("describe") else user_task.name
    say(f"{described}; output in {paths.output}")
    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    progress = _resume(checkpoint, model, paths, steps, say)
    stretches = remaining_stretches(progress, config.epochs)
    if not stretches:
        say(f"all {config.epochs} epochs are done already ({paths.checkpoints}); nothing to train")
        return 0
    task_summary = _task_summary(user_task, config)
    if rank.is_chief:
        layout = {"workers": max(1, rank.num_workers), "replicas": replicas, "per_replica_batch": config.batch_size,
                  "steps_per_epoch": steps, "task": config.task, **task_summary, "seed": config.seed}
        _note_layout_changes(paths.output, layout, progress)
        write_state(paths.output, "running", **_position(progress), layout=layout, max_retries=config.max_retries)
    report = EpochReport(paths.output if rank.is_chief else None, global_batch, config.epochs,
                         {**_summary(config, rank, replicas, global_batch, steps, tf.__version__), **task_summary},
                         say)
    save = StepSaver(tf.train.CheckpointManager(checkpoint, paths.writes / "checkpoints", max_to_keep=3), model)
    callbacks = _callbacks(config, rank, paths, signals, strategy, save, report)
    validation_data = (inputs.for_fit(inputs.validation_fn(user_task, config), config.strategy)
                       if validation_steps else None)
    try:
        for stretch in stretches:
            training_data = inputs.training_fn(user_task, config, _batches_done(config, rank, pipelines,
                                                                                stretch.start_step))
            model.fit(inputs.for_fit(training_data, config.strategy), epochs=stretch.end_epoch,
                      initial_epoch=stretch.first_epoch, steps_per_epoch=stretch.steps,
                      validation_data=validation_data, validation_steps=validation_steps, callbacks=callbacks,
                      verbose=0)
    except StoppedEarly as stop:
        code = _stopped(stop, config, rank, Progress(int(model.optimizer.iterations.numpy()), steps), paths,
                        signals, say)
        _leave_now(code, paths)
    except Pruned as pruned:
        if rank.is_chief:
            write_state(paths.output, "pruned", epoch=pruned.epoch, reason=pruned.reason,
                        checkpoint=pruned.checkpoint, **_position(Progress(int(model.optimizer.iterations.numpy()),
                                                                           steps)))
            say(f"pruned after epoch {pruned.epoch}/{config.epochs}: {pruned.reason}; checkpoint {pruned.checkpoint} "
                "kept; its nodes go to the elements still waiting")
        _leave_now(0, paths)
    except (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.DeadlineExceededError) as error:
        raise _lost_contact(error, rank, paths) from None
    report.summary["checkpoint_saves"] = save.timings  # this run's saves: step and seconds each
    _finish(model, config, rank, user_task, paths, report, say)
    return 0


def _compiled_model(config: TrainConfig, strategy: Any, user_task: TaskModule, steps: int) -> Any:
    from hpc_train.training.keras import keras, tf
    from hpc_train.training.metrics import sync_metrics_per_epoch
    from hpc_train.training.usertask import TaskError

    keras.utils.set_random_seed(config.seed)
    keras.mixed_precision.set_global_policy(config.precision)
    with strategy.scope():
        model = user_task.call("build_model", config=config)
        where = user_task.describe_call("build_model")
        if not isinstance(model, keras.Model):
            kind = "a Keras 3 model" if type(model).__module__.startswith("keras") else f"a {type(model).__name__}"
            raise TaskError(f"{where} returned {kind}, not a tf_keras model; build it with `import tf_keras as "
                            "keras` (Keras 3 cannot train under these strategies) and return it compiled")
        if model.optimizer is None or not getattr(model, "compiled_loss", None):
            raise TaskError(f"{where} returned a model that is not compiled; call model.compile(optimizer=..., "
                            "loss=...) before returning it")
        _use_steps_per_execution(model, min(config.steps_per_execution, steps))
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        sync_metrics_per_epoch(model)  # one all-reduce per step, the gradients', instead of seven
    return model


def _use_steps_per_execution(model: Any, steps: int) -> None:
    """The config's steps per call into TensorFlow, unless the task compiled its model with its own.

    It is also how often a stop request is looked at (callbacks.StopAtStepBoundary).
    """
    current = getattr(model, "_steps_per_execution", None)
    if current is None or int(current.numpy()) == 1:
        model._configure_steps_per_execution(steps)


def _batches_done(config: TrainConfig, rank: RankInfo, pipelines: Any, start_step: int) -> int:
    """Batches each input pipeline has read by global step `start_step`."""
    # Parameter-server workers take steps as they come free: each is given an even share.
    steps_done = start_step // max(1, rank.num_workers) if config.strategy == "parameter_server" else start_step
    return steps_done * pipelines.local_replicas


def _resume(checkpoint: Any, model: Any, paths: RunPaths, steps: int, say: Any) -> Progress:
    """Restore the newest good checkpoint, if any; the step it holds (the optimizer's count) is where we are."""
    from hpc_train.training.checkpoints import restore_newest

    restored = restore_newest(checkpoint, paths.checkpoints)
    progress = Progress(int(model.optimizer.iterations.numpy()), steps)
    if restored:
        say(f"resuming {progress.describe()} from {restored}")
    return progress


def _callbacks(config: TrainConfig, rank: RankInfo, paths: RunPaths, signals: StopSignals, strategy: Any,
               save: Any, report: Any) -> list[Any]:
    """The report, checkpoints, TensorBoard (chief), then the stop check, whose epoch end comes last."""
    from hpc_train.training.callbacks import (EpochCheckpoint, FirstSteps, ProgressBeat, PruneAtRungs,
                                              StopAtStepBoundary, agreement, any_rank)
    from hpc_train.training.checkpoints import timed_save_due
    from hpc_train.training.keras import keras

    def started(seconds: float) -> None:
        report.summary["first_steps_after_seconds"] = round(seconds, 2)  # metrics.json: this run's start-up
        if rank.is_chief:
            report.print_line(f"training: first steps done {seconds:.1f} s after the process started")
            report.summary["failures"] = _count_failure_cost(paths.output)

    # The report first: its epoch's training time then leaves out the save, with validation or without.
    callbacks: list[Any] = [FirstSteps(started), report,
                            EpochCheckpoint(save, config.epochs, config.checkpoint_share, any_rank(strategy))]
    if rank.is_chief:
        callbacks.append(keras.callbacks.TensorBoard(str(paths.output / "tensorboard"), write_graph=False))
        if swept := swept_values(config, os.environ):
            _write_hparams(paths.output / "tensorboard", swept, os.environ.get("HPC_TRAIN_TRIAL"))
        callbacks.append(ProgressBeat(lambda step: attempts.write_progress(paths.output, step),
                                      lambda: int(save.model.optimizer.iterations.numpy())))
    if config.prune == "halving":
        callbacks.append(PruneAtRungs(_pruning_verdict(config, rank, paths), any_rank(strategy), save, config.epochs))
    callbacks.append(StopAtStepBoundary(lambda: signals.kind, agreement(strategy), save, config.epochs,
                                        timed_save_due(save, config.checkpoint_minutes, config.checkpoint_share)))
    return callbacks


def _pruning_verdict(config: TrainConfig, rank: RankInfo, paths: RunPaths) -> Any:
    """The chief's verdict at a rung: why this sweep element is pruned, or None (the other ranks: None)."""
    from hpc_train.training.pruning import objective_name, verdict

    def decide(epoch: int, logs: dict[str, Any]) -> str | None:
        if not rank.is_chief:
            return None
        objective = objective_name(config.objective, logs)
        own = logs.get(objective)
        prune, reached = verdict(paths.output, epoch, objective, float(own) if own is not None else None)
        return (f"{objective} {float(own):.4f} ranks in the worse half of the {reached} elements at epoch {epoch}"
                if prune else None)

    return decide


def swept_values(config: TrainConfig, environ: Any) -> dict[str, Any]:
    """This run's swept settings, when it is an element of a sweep (HPC_TRAIN_SWEEP_<KEY>, set by its script)."""
    keys = [name[len("HPC_TRAIN_SWEEP_"):].lower() for name in environ if name.startswith("HPC_TRAIN_SWEEP_")]
    values = {key: getattr(config, key) for key in sorted(keys) if hasattr(config, key)}
    return {key: value for key, value in values.items() if isinstance(value, (bool, int, float, str))}


def _write_hparams(logdir: Path, values: dict[str, Any], trial: str | None) -> None:
    """TensorBoard's HParams summary of this element: `tensorboard --logdir runs/` compares a sweep in its view."""
    from tensorboard.plugins.hparams import api as hp

    from hpc_train.training.keras import tf

    with tf.summary.create_file_writer(str(logdir)).as_default():
        hp.hparams(values, trial_id=trial)


def _count_failure_cost(output: Path) -> dict[str, Any]:
    """Once a retried run trains again: what its last failure cost (from the checkpoint it resumed from to now),
    into the history; and every failure's count and cost so far, for metrics.json."""
    history = attempts.history(output)
    last = history[-1] if history else {}
    if last.get("action") in ("retried", "requeued by Slurm") and "resumed_at" not in last:
        now = time.time()
        since = last.get("checkpoint_time") or last.get("time") or now
        attempts.update_last(output, resumed_at=round(now, 3), seconds_lost=round(max(0.0, now - since), 1))
        history = attempts.history(output)
    failures = attempts.failures(history)
    return {"count": len(failures),
            "seconds_lost": round(sum(attempt.get("seconds_lost", 0) for attempt in failures), 1)}


def _lost_contact(error: Exception, rank: RankInfo, paths: RunPaths) -> LostContact:
    """One line for a rank that died under us: who, and how to go on (a traceback says neither)."""
    message = str(error)
    peers = lost_peers(message, rank)
    who = ", ".join(peers) if peers else "another task of the job"
    detail = next((line.strip() for line in message.splitlines() if "UNAVAILABLE" in line or "aborted" in line),
                  message.strip().splitlines()[0] if message.strip() else type(error).__name__)
    return LostContact(f"lost contact with {who} ({detail[:160]}); the job cannot go on without it: it is retried "
                       f"on other nodes if it may be, else run it again to resume from the last checkpoint in "
                       f"{paths.checkpoints}", ", ".join(peer.split(" at ")[0] for peer in peers) or "a peer",
                       tuple(dict.fromkeys(peer.split(" at ")[1].rsplit(":", 1)[0] for peer in peers)))


def _stopped(stop: Any, config: TrainConfig, rank: RankInfo, progress: Progress, paths: RunPaths,
             signals: StopSignals, say: Any) -> int:
    """Every rank saved at the same step; the chief records it and requeues the job if it was warned."""
    cause = signals.signal_name or "another task's stop request"
    _log(rank, f"stopped by {cause} {progress.describe()}; checkpoint {stop.checkpoint}")
    if not rank.is_chief:
        return 0  # not an error: a non-zero exit could make srun kill the chief before it is done
    details = {**_position(progress), "signal": cause, "checkpoint": stop.checkpoint}
    if stop.kind is StopKind.WARNING:
        def leaving(job_id: str) -> None:
            write_state(paths.output, "requeued", **details)
            _let_workers_leave(rank)

        outcome = requeue_stopped(os.environ, config.max_requeues, paths.output, progress.global_step, leaving)
        if outcome.requeued:
            say(f"stopped {progress.describe()} and saved {stop.checkpoint}; {outcome.says()}: it resumes from there")
            return 0
        why_not = outcome.reason if outcome.problem is None else f"{outcome.says()}; resubmit it to resume"
        write_state(paths.output, "stopped", **details, not_requeued=why_not)
        say(f"stopped {progress.describe()} and saved {stop.checkpoint}; not requeued: {why_not}")
        return EXIT_STOPPED
    write_state(paths.output, "stopped", **details)
    say(f"stopped {progress.describe()} by {cause} and saved {stop.checkpoint}; running the job again resumes there")
    return EXIT_STOPPED


def _leave_now(code: int, paths: RunPaths) -> NoReturn:
    """End the process at once: everything is saved, and TensorFlow's teardown after a stop can wait
    for seconds (a worker's input iterator waits on the chief that has left), beyond Slurm's KillWait."""
    paths.remove_scratch()
    sys.stdout.flush()
    drain()  # os._exit skips atexit: the stderr filter gets its last lines now
    os._exit(code)


def _let_workers_leave(rank: RankInfo, timeout: float = 30.0) -> None:
    """Requeueing ends the job's processes: let the other MultiWorkerMirrored workers exit first.

    (Parameter-server ranks, on the contrary, wait for the chief to leave.)
    """
    if rank.cluster and "chief" not in rank.cluster:
        staying = wait_for_departures(rank, timeout)
        if staying:
            _log(rank, f"{', '.join(staying)} still running after {timeout:.0f} s; requeueing anyway")


def _finish(model: Any, config: TrainConfig, rank: RankInfo, user_task: TaskModule, paths: RunPaths,
            report: Any, say: Any) -> None:
    """Save the model (every rank takes part), and on the chief record the task's final figures."""
    _save_model_atomically(model, paths.writes / "model.keras")
    _log(rank, f"finished; weights digest {weights_digest(model.get_weights())}")
    if rank.is_chief:
        final = _final_metrics(model, config, user_task, report)
        report.write(final)
        write_state(paths.output, "finished", epochs=config.epochs, **final)
        (paths.output / attempts.PROGRESS_FILE).unlink(missing_ok=True)  # for a failure's steps redone: none now
        shown = ", ".join(f"{name} {value:.4f}" if isinstance(value, float) else f"{name} {value}"
                          for name, value in final.items())
        say(f"done{': ' + shown if shown else ''}; model {paths.output / 'model.keras'}, "
            f"metrics {metrics_path(paths.output)}")


def _final_metrics(model: Any, config: TrainConfig, user_task: TaskModule, report: Any) -> dict[str, Any]:
    """The task's own final figures, else the last epoch's validation figures."""
    from hpc_train.training.usertask import TaskError

    if not user_task.has("final_metrics"):
        last = report.epochs[-1] if report.epochs else {}
        return {f"final_{name}": value for name, value in last.items() if name.startswith("val_")}
    # On the chief alone: a copy outside the strategy, since the distributed model's predict and evaluate
    # would wait for workers that have finished.
    local = user_task.call("build_model", config=config)
    local.set_weights(model.get_weights())
    final = user_task.call("final_metrics", local, config=config)
    if not isinstance(final, dict) or not all(isinstance(key, str) for key in final):
        raise TaskError(f"{user_task.describe_call('final_metrics')} returned a {type(final).__name__}; "
                        "return a dict of name -> number")
    numbers = {}
    for name, value in final.items():  # numpy and 0-d tensor values too; metrics.json and state.json hold numbers
        try:
            numbers[name] = value if isinstance(value, int) and not isinstance(value, bool) else float(value)
        except (TypeError, ValueError):
            raise TaskError(f"{user_task.describe_call('final_metrics')} returned {name!r}: a "
                            f"{type(value).__name__}, not a number; return a dict of name -> number") from None
    return numbers


def _task_summary(user_task: TaskModule, config: TrainConfig) -> dict[str, Any]:
    """The task's own fields for metrics.json (summary()), checked before any training, on every rank."""
    from hpc_train.training.usertask import TaskError

    if not user_task.has("summary"):
        return {}
    summary = user_task.call("summary", config=config)
    if not isinstance(summary, dict) or not all(isinstance(key, str) for key in summary):
        raise TaskError(f"{user_task.describe_call('summary')} returned a {type(summary).__name__}; "
                        "return a dict of name -> value for metrics.json")
    try:
        json.dumps(summary)
    except (TypeError, ValueError) as error:
        raise TaskError(f"{user_task.describe_call('summary')} returned what metrics.json cannot hold ({error}); "
                        "return numbers, strings, and lists or dicts of them") from None
    return summary


def _save_model_atomically(model: Any, path: Path) -> None:
    """Save beside, then rename: an interrupted save never replaces a good model file with half of one."""
    partial = path.with_name(f".partial-{path.name}")  # Keras insists on the .keras ending
    model.save(partial)
    os.replace(partial, path)


def _note_layout_changes(output: Path, layout: dict[str, Any], progress: Progress) -> None:
    """Warn when a resumed run cannot continue the data order exactly (the step count still holds)."""
    changes = layout_changes(read_state(output).get("layout", {}), layout)
    if changes and progress.global_step:
        print(f"hpc-train: warning: resuming with another input layout ({'; '.join(changes)}): training goes on "
              f"from step {progress.global_step}, but not with the exact batches the stopped run had next",
              file=sys.stderr, flush=True)


def _position(progress: Progress) -> dict[str, int]:
    return {"global_step": progress.global_step, "epochs_done": progress.epochs_done,
            "step_in_epoch": progress.step_in_epoch, "steps_per_epoch": progress.steps_per_epoch}


def _summary(config: TrainConfig, rank: RankInfo, replicas: int, global_batch: int, steps: int,
             tf_version: str) -> dict[str, Any]:
    import tf_keras

    return {"strategy": config.strategy, "task": config.task, "world_size": max(1, sum(map(len, rank.cluster.values()))),
            "workers": max(1, rank.num_workers), "replicas": replicas, "per_replica_batch": config.batch_size,
            "global_batch": global_batch, "steps_per_epoch": steps, "tensorflow": tf_version,
            "tf_keras": tf_keras.__version__, "config": applying_settings(config)}


def weights_digest(weights: list[Any]) -> str:
    """A short fingerprint of a model's weights: equal on every worker of a synchronous run."""
    digest = hashlib.sha256()
    for array in weights:
        digest.update(array.tobytes())
    return digest.hexdigest()[:16]


def _world(rank: RankInfo) -> str:
    if not rank.cluster:
        return "1 process"
    return ", ".join(f"{len(addresses)} {role}{'' if len(addresses) == 1 or role == 'ps' else 's'}"
                     for role, addresses in rank.cluster.items())


def _log(rank: RankInfo, message: str) -> None:
    """One line per rank on stderr, for the job log (progress stays on the chief's stdout)."""
    print(f"hpc-train [{rank.type} {rank.index}]: {message}", file=sys.stderr, flush=True)


def _printer(rank: RankInfo) -> Any:
    """Progress goes to stdout on the chief only; other ranks stay quiet."""
    if rank.is_chief:
        return lambda line: print(f"hpc-train: {line}", flush=True)
    return lambda line: None


def _remove_if_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass

