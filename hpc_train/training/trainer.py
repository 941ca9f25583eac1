"""One training run, for any strategy and any task module: model, data, resume, fit, chief's outputs, exit.

What is trained comes from the task module (`task`, usertask.py), built-in or a user's: the loop names none.

Only the chief writes checkpoints, TensorBoard logs, the final model and metrics.json under `output_dir`; the
other ranks write into scratch (paths.py). Parameter-server ps and worker ranks run a server until the chief has
finished, then exit 0; a job's rank leaves at once when its run is over (outcome.py).

Nothing finished is lost: a checkpoint after every epoch, and one at the next step boundary when Slurm warns of the
time limit (USR1, USR2) or stops the job (TERM). A warned job requeues itself and resumes at that very step, with
the batch that was next (progress.py, and the task's own seeking). The chief keeps `state.json` saying whether the
run is running, stopped, requeued, pruned or finished; how a run ends is outcome.py's.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hpc_train.config import TrainConfig, applying_settings
from hpc_train.runs import attempts
from hpc_train.runs.hparams import tensorboard_dir, write_hparams
from hpc_train.runs.secret import job_secret
from hpc_train.runs.stacks import answer_requests
from hpc_train.runs.state import layout_changes, read_state, steps_kept_at_a_new_size, write_state
from hpc_train.slurm.noderange import size_field
from hpc_train.training import outcome
from hpc_train.training.lines import Say, log, printer, world
from hpc_train.training.memory import keep_freed_memory
from hpc_train.training.paths import RunPaths
from hpc_train.training.precision import job_precision
from hpc_train.training.progress import Progress, Stretch, remaining_stretches, replica_batch
from hpc_train.training.rank import RankInfo, prepare_rank
from hpc_train.training.rendezvous import meet
from hpc_train.training.stopping import StopSignals
from hpc_train.training.threads import size_inter_op_pool
from hpc_train.training.usertask import TaskModule, checked_model, load_task, task_summary


@dataclass(frozen=True)
class Shape:
    """What every rank checked before any step: the compiled model, its input pipelines, an epoch's steps."""

    model: Any
    pipelines: Any  # inputs.Pipelines
    replicas: int
    steps: int
    validation_steps: int | None

    def progress(self) -> Progress:
        """Where training is: the optimizer's step count."""
        return Progress(int(self.model.optimizer.iterations.numpy()), self.steps)


def run(config: TrainConfig, user_task: TaskModule | None = None) -> int:
    """Train as this rank's role asks; return the process's exit code.

    `user_task`: the task's functions, when given directly (hpc_train.fit); else `config.task` is imported.
    """
    # First of all: Slurm's warning signal would otherwise end a rank that is still starting.
    signals = StopSignals().install()
    answer_requests(config.output_dir)  # the job's hang watchdog may ask for this rank's stacks (runs/stacks.py)
    if config.tune_malloc:
        keep_freed_memory()  # before TensorFlow allocates: 2x the images/s without oneDNN (memory.py)
    rank = prepare_rank(config)  # before TensorFlow starts: it may set CUDA_VISIBLE_DEVICES
    size_inter_op_pool(config.inter_op_threads, config.strategy)  # before TensorFlow starts (threads.py)
    with outcome.noting_failures(config.output_dir, rank):
        try:
            return _run(config, rank, user_task, signals)
        finally:
            signals.close()


def _run(config: TrainConfig, rank: RankInfo, user_task: TaskModule | None, signals: StopSignals) -> int:
    import hpc_train.training.keras  # noqa: F401  # TensorFlow at its least cost, before a task module imports it
    # Every rank imports the task module before meeting the others: one that cannot be used fails them all at once.
    user_task = user_task or load_task(config.task)
    if rank.cluster:
        # Fail fast, naming who is missing, rather than wait in TensorFlow; counting only the job's own ranks.
        meet(rank, config.startup_timeout, job_secret(os.environ))
    if config.strategy == "parameter_server" and rank.type != "chief":
        from hpc_train.training.servers import serve_until_chief_leaves

        return serve_until_chief_leaves(rank, signals, config.startup_timeout)
    paths = RunPaths(Path(config.output_dir), rank)
    try:
        return _train(config, user_task, paths, signals)
    finally:
        paths.remove_scratch()


def _train(config: TrainConfig, user_task: TaskModule, paths: RunPaths, signals: StopSignals) -> int:
    from hpc_train.training.callbacks import EpochReport
    from hpc_train.training.checkpoints import StepSaver
    from hpc_train.training.keras import tf
    from hpc_train.training.strategy import gpus_unused_note, make_strategy

    rank, say = paths.rank, printer(paths.rank)
    strategy = make_strategy(config)
    config = replica_batch(config, strategy.num_replicas_in_sync)  # a global_batch (a node range's) shared out
    # TensorFlow's coordination service (multi-worker strategies) installs its own SIGTERM handler in C++,
    # which would swallow Slurm's SIGTERM: take the signals back. A step that never returns would hold a stop
    # forever: the watcher ends the process on a second stop or after a grace period (stopping.py).
    signals.install().watch(outcome.ended_at_once(paths))  # the chief's state.json then says so
    if note := gpus_unused_note():
        log(rank, note)
    precision = job_precision(config.precision, strategy)
    shape = _shape(config, paths, user_task, strategy, precision.policy)
    global_batch = config.batch_size * shape.replicas
    say(f"{config.strategy}: {world(rank)}, {shape.replicas} replica(s) in sync; batch {config.batch_size} per "
        f"replica, {global_batch} global; {shape.steps} steps per epoch; {precision.describe()}")
    described = user_task.call("describe", config=config) if user_task.has("describe") else user_task.name
    say(f"{described}; output in {paths.output}")
    checkpoint = tf.train.Checkpoint(model=shape.model, optimizer=shape.model.optimizer)
    progress = _resume(checkpoint, shape, paths, say)
    stretches = remaining_stretches(progress, config.epochs)
    if not stretches:
        say(f"all {config.epochs} epochs are done already ({paths.checkpoints}); nothing to train")
        return 0
    own_fields = task_summary(user_task, config)
    if rank.is_chief:
        _note_running(config, shape, own_fields, progress, paths.output)
    report = EpochReport(paths.output if rank.is_chief else None, global_batch, config.epochs,
                         {**_summary(config, rank, shape, tf.__version__), "precision": asdict(precision),
                          **own_fields}, say)
    save = StepSaver(tf.train.CheckpointManager(checkpoint, paths.writes / "checkpoints", max_to_keep=3), shape.model)
    callbacks = _callbacks(config, paths, signals, strategy, save, report)
    _fit(config, user_task, shape, stretches, callbacks, paths, signals, say)
    report.summary["checkpoint_saves"] = save.timings  # this run's saves: step and seconds each
    outcome.finished(shape.model, config, user_task, paths, report, say)
    return 0


def _shape(config: TrainConfig, paths: RunPaths, user_task: TaskModule, strategy: Any, policy: str) -> Shape:
    """The model and the data, checked the same way on every rank before any step: a rank that cannot train
    fails them all at once."""
    from hpc_train.training import inputs

    replicas = strategy.num_replicas_in_sync
    pipelines = inputs.Pipelines(max(1, paths.rank.num_workers), replicas, config.strategy == "parameter_server")
    # Each pipeline's epoch is built once to be counted and checked (the training stream is built per stretch).
    training_epochs = inputs.EpochDatasets(user_task, config, "train_dataset")
    steps = steps_kept_at_a_new_size(read_state(paths.output).get("layout", {}), config.batch_size * replicas,
                                     pipelines.count, inputs.epoch_steps(user_task, config, pipelines, training_epochs))
    validation_steps = inputs.validation_steps(user_task, config, pipelines)
    model = compiled_model(config, strategy, user_task, steps, policy)
    # Every pipeline's epoch, counted and checked, is let go on return: none is held while training.
    inputs.check_model_fits(user_task, model, training_epochs.get(pipelines.contexts()[0]))
    return Shape(model, pipelines, replicas, steps, validation_steps)


def _fit(config: TrainConfig, user_task: TaskModule, shape: Shape, stretches: list[Stretch], callbacks: list[Any],
         paths: RunPaths, signals: StopSignals, say: Say) -> None:
    """Train each stretch; a stop or a prune ends the process here, a lost peer raises LostContact."""
    from hpc_train.training import inputs
    from hpc_train.training.callbacks import Pruned, StoppedEarly
    from hpc_train.training.keras import tf

    validation_data = (inputs.for_fit(inputs.validation_fn(user_task, config), config.strategy)
                       if shape.validation_steps else None)
    try:
        for stretch in stretches:
            batches_done = _batches_done(config, paths.rank, shape.pipelines, stretch.start_step)
            training_data = inputs.training_fn(user_task, config, batches_done)
            shape.model.fit(inputs.for_fit(training_data, config.strategy), epochs=stretch.end_epoch,
                            initial_epoch=stretch.first_epoch, steps_per_epoch=stretch.steps,
                            validation_data=validation_data, validation_steps=shape.validation_steps,
                            callbacks=callbacks, verbose=0)
    except StoppedEarly as stop:
        outcome.leave_now(outcome.stopped(stop, config, shape.progress(), paths, signals, say), paths)
    except Pruned as verdict:
        outcome.leave_now(outcome.pruned(verdict, config, shape.progress(), paths, say), paths)
    except (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.DeadlineExceededError,
            tf.errors.InvalidArgumentError) as error:  # (a peer lost, or the data service's share of a dataset)
        raise outcome.in_fit(error, paths.rank, paths) from None


def compiled_model(config: TrainConfig, strategy: Any, user_task: TaskModule, steps: int, policy: str) -> Any:
    from hpc_train.training.keras import keras, tf
    from hpc_train.training.metrics import sync_metrics_per_epoch

    keras.utils.set_random_seed(config.seed)
    keras.mixed_precision.set_global_policy(policy)
    with strategy.scope():
        model = checked_model(user_task, user_task.call("build_model", config=config), keras.Model)
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


def _resume(checkpoint: Any, shape: Shape, paths: RunPaths, say: Say) -> Progress:
    """Restore the newest good checkpoint, if any; the step it holds (the optimizer's count) is where we are."""
    from hpc_train.training.checkpoints import restore_newest

    restored = restore_newest(checkpoint, paths.checkpoints)
    progress = shape.progress()
    if restored:
        say(f"resuming {progress.describe()} from {restored}")
    return progress


def _callbacks(config: TrainConfig, paths: RunPaths, signals: StopSignals, strategy: Any, save: Any,
               report: Any) -> list[Any]:
    """The report, checkpoints, TensorBoard (chief), then the stop check, whose epoch end comes last."""
    from hpc_train.training.callbacks import (EpochCheckpoint, FirstSteps, ProgressBeat, PruneAtRungs,
                                              StopAtStepBoundary, agreement, any_rank)
    from hpc_train.training.checkpoints import timed_save_due
    from hpc_train.training.goodput import trainers_goodput
    from hpc_train.training.keptiterator import KeptIterator
    from hpc_train.training.keras import keras
    from hpc_train.training.pruning import reports

    rank = paths.rank

    def started(seconds: float) -> None:
        report.summary["first_steps_after_seconds"] = round(seconds, 2)  # metrics.json: this run's start-up
        if rank.is_chief:
            report.print_line(f"training: first steps done {seconds:.1f} s after the process started")
            report.summary["failures"] = attempts.count_failure_cost(paths.output)

    # The ledger's first (the iterator's keeper wraps its train function), the report before the save: its epoch's
    # times leave the save out (goodput.py).
    callbacks: list[Any] = [*trainers_goodput(paths, save, report.print_line), KeptIterator(), FirstSteps(started),
                            report, EpochCheckpoint(save, config.epochs, config.checkpoint_share, any_rank(strategy))]
    if rank.is_chief:
        callbacks.append(keras.callbacks.TensorBoard(str(tensorboard_dir(paths.output)), write_graph=False))
        write_hparams(paths.output, config, os.environ)
        callbacks.append(ProgressBeat(lambda step: attempts.write_progress(paths.output, step),
                                      lambda: int(save.model.optimizer.iterations.numpy())))
    if config.prune != "none" or reports(paths.output):
        callbacks.append(PruneAtRungs(_pruning_verdict(config, paths), any_rank(strategy), save, config.epochs))
    callbacks.append(StopAtStepBoundary(signals.requested, agreement(strategy), save, config.epochs,
                                        timed_save_due(save, config.checkpoint_minutes, config.checkpoint_share)))
    return callbacks


def _pruning_verdict(config: TrainConfig, paths: RunPaths) -> Any:
    """The chief's verdict at an epoch's end (its objective reported to the element's trial): why this sweep
    element is pruned, or None (the other ranks: None)."""
    from hpc_train.training.pruning import objective_name, verdicts

    verdict = verdicts(paths.output)

    def decide(epoch: int, logs: dict[str, Any]) -> str | None:
        if not paths.rank.is_chief:
            return None
        objective = objective_name(config.objective, logs)
        own = logs.get(objective)
        prune = verdict(epoch, float(own) if own is not None else None)
        return (f"{objective} {float(own):.4f} at epoch {epoch}: Optuna's {config.prune} pruner stops it"
                if prune else None)

    return decide


def _note_running(config: TrainConfig, shape: Shape, own_fields: dict[str, Any], progress: Progress,
                  output: Path) -> None:
    """The chief's state.json: running, with the input layout; a warning when a resumed run's layout changed."""
    layout = {"workers": shape.pipelines.count, "replicas": shape.replicas,
              "per_replica_batch": config.batch_size, "global_batch": config.batch_size * shape.replicas,
              "steps_per_epoch": shape.steps, "task": config.task,
              **own_fields, "seed": config.seed}
    changes = layout_changes(read_state(output).get("layout", {}), layout)
    if changes and progress.global_step:
        print(f"hpc-train: warning: resuming with another input layout ({'; '.join(changes)}): training goes on "
              f"from step {progress.global_step}, but not with the exact batches the stopped run had next",
              file=sys.stderr, flush=True)
    write_state(output, "running", **progress.position(), layout=layout, max_retries=config.max_retries)


def _summary(config: TrainConfig, rank: RankInfo, shape: Shape, tf_version: str) -> dict[str, Any]:
    """metrics.json's fields on the run itself: strategy, world, batch, versions and the settings that applied."""
    import tf_keras

    world_size = max(1, sum(map(len, rank.cluster.values())))
    return {"strategy": config.strategy, "task": config.task, "world_size": world_size,
            "workers": max(1, rank.num_workers), "replicas": shape.replicas, "per_replica_batch": config.batch_size,
            "global_batch": config.batch_size * shape.replicas, "steps_per_epoch": shape.steps,
            **size_field(os.environ), "tensorflow": tf_version, "tf_keras": tf_keras.__version__, "config": applying_settings(config)}
