"""One training run, for any strategy: data, model, resume, fit, chief's outputs, exit.

Only the chief writes checkpoints, TensorBoard logs, the final model and
metrics.json under `output_dir`. Other MultiWorkerMirrored workers take part in
every save (a save may need all of them) but write into their own scratch
directory, which is removed at the end. Parameter-server ps and worker tasks
run a server until the chief has finished, then exit 0.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpc_train.config import TrainConfig, to_dict
from hpc_train.mnist import MnistSplits, load_mnist
from hpc_train.training.cluster import TaskInfo, prepare_task


@dataclass(frozen=True)
class RunPaths:
    """Where this task writes: the output directory for the chief, scratch for the others."""

    output: Path
    task: TaskInfo

    @property
    def writes(self) -> Path:
        if self.task.is_chief:
            return self.output
        return self.output / ".scratch" / f"{self.task.type}-{self.task.index}"

    @property
    def checkpoints(self) -> Path:
        return self.output / "checkpoints"  # every task restores from the chief's

    def remove_scratch(self) -> None:
        if not self.task.is_chief:
            shutil.rmtree(self.writes, ignore_errors=True)
            _remove_if_empty(self.writes.parent)


def run(config: TrainConfig) -> int:
    """Train as this task's role asks; return the process's exit code."""
    task = prepare_task(config)  # before TensorFlow starts: it may set CUDA_VISIBLE_DEVICES
    from hpc_train.training.keras import tf

    if config.inter_op_threads:
        tf.config.threading.set_inter_op_parallelism_threads(config.inter_op_threads)
    if config.strategy == "parameter_server" and task.type != "chief":
        from hpc_train.training.servers import serve_until_chief_leaves

        return serve_until_chief_leaves(task)
    splits = load_mnist(config.data_dir, config.train_images, config.validation_images)
    paths = RunPaths(Path(config.output_dir), task)
    try:
        return _train(config, task, splits, paths)
    finally:
        paths.remove_scratch()


def _train(config: TrainConfig, task: TaskInfo, splits: MnistSplits, paths: RunPaths) -> int:
    from hpc_train.training.callbacks import EpochCheckpoint, EpochReport
    from hpc_train.training.checkpoints import restore_newest
    from hpc_train.training.keras import keras, tf
    from hpc_train.training.model import build_model, compile_model
    from hpc_train.training.strategy import make_strategy

    strategy = make_strategy(config)
    say = _printer(task)
    replicas = strategy.num_replicas_in_sync
    global_batch = config.batch_size * replicas
    steps = config.steps_per_epoch or max(1, len(splits.train_images) // global_batch)
    keras.utils.set_random_seed(config.seed)
    keras.mixed_precision.set_global_policy(config.precision)
    with strategy.scope():
        model = build_model(config.model)
        compile_model(model, config.optimizer, config.learning_rate, min(config.steps_per_execution, steps))
    say(f"{config.strategy}: {_world(task)}, {replicas} replica(s) in sync; batch {config.batch_size} per replica, "
        f"{global_batch} global; {steps} steps per epoch; {config.precision}")
    say(f"MNIST from {splits.source}: {len(splits.train_images)} training, {len(splits.validation_images)} "
        f"validation images; output in {paths.output}")
    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    initial_epoch = restore_newest(checkpoint, paths.checkpoints, say)
    if initial_epoch >= config.epochs:
        say(f"all {config.epochs} epochs are done already ({paths.checkpoints}); nothing to train")
        return 0

    summary = _summary(config, task, replicas, global_batch, steps, splits, tf.__version__)
    report = EpochReport(paths.output / "metrics.json" if task.is_chief else None, steps * global_batch,
                         config.epochs, summary, print_line=say)
    manager = tf.train.CheckpointManager(checkpoint, paths.writes / "checkpoints", max_to_keep=3)
    callbacks: list[keras.callbacks.Callback] = [EpochCheckpoint(manager), report]
    if task.is_chief:
        callbacks.append(keras.callbacks.TensorBoard(str(paths.output / "tensorboard"), write_graph=False))
    train_data, validation_data, validation_steps = _datasets(config, splits, replicas)
    model.fit(train_data, epochs=config.epochs, initial_epoch=initial_epoch, steps_per_epoch=steps,
              validation_data=validation_data, validation_steps=validation_steps, callbacks=callbacks, verbose=0)
    _finish(model, config, task, splits, paths, report, say)
    return 0


def _finish(model: Any, config: TrainConfig, task: TaskInfo, splits: MnistSplits, paths: RunPaths,
            report: Any, say: Any) -> None:
    """Save the model (every task takes part), and on the chief measure and record the final accuracy."""
    model.save(paths.writes / "model.keras")
    _log(task, f"finished; weights digest {weights_digest(model.get_weights())}")
    if task.is_chief:
        accuracy = _exact_validation_accuracy(model, config.model, splits)
        report.write({"final_val_accuracy": accuracy})
        say(f"done: validation accuracy {accuracy:.4f} on {len(splits.validation_images)} images; "
            f"model {paths.output / 'model.keras'}, metrics {paths.output / 'metrics.json'}")


def _datasets(config: TrainConfig, splits: MnistSplits, replicas: int) -> tuple[Any, Any, int]:
    from hpc_train.training.keras import keras
    from hpc_train.training.pipeline import training_dataset_fn, validation_dataset_fn, validation_plan

    train_fn = training_dataset_fn(splits.train_images, splits.train_labels, config.batch_size, config.seed)
    validation_batch, validation_steps = validation_plan(len(splits.validation_images), replicas)
    validation_fn = validation_dataset_fn(splits.validation_images, splits.validation_labels, validation_batch)
    if config.strategy == "none":
        return train_fn(None), validation_fn(None), validation_steps
    # Each worker builds its own pipeline (and shard) from the function.
    creator = keras.utils.experimental.DatasetCreator
    return creator(train_fn), creator(validation_fn), validation_steps


def _exact_validation_accuracy(model: Any, model_name: str, splits: MnistSplits) -> float:
    """Accuracy on every validation image once, on this process alone, whatever the strategy."""
    from hpc_train.training.model import build_model
    from hpc_train.training.keras import tf

    local = build_model(model_name)
    local.set_weights(model.get_weights())
    images = tf.expand_dims(tf.cast(splits.validation_images, tf.float32) / 255.0, -1)
    predictions = tf.argmax(local.predict(images, batch_size=500, verbose=0), axis=1)
    return float(tf.reduce_mean(tf.cast(predictions == tf.cast(splits.validation_labels, tf.int64), tf.float32)))


def _summary(config: TrainConfig, task: TaskInfo, replicas: int, global_batch: int, steps: int,
             splits: MnistSplits, tf_version: str) -> dict[str, Any]:
    import tf_keras

    return {"strategy": config.strategy, "world_size": max(1, sum(map(len, task.cluster.values()))),
            "workers": max(1, task.num_workers), "replicas": replicas, "per_replica_batch": config.batch_size,
            "global_batch": global_batch, "steps_per_epoch": steps, "train_images": len(splits.train_images),
            "validation_images": len(splits.validation_images), "data": splits.source,
            "tensorflow": tf_version, "tf_keras": tf_keras.__version__, "config": to_dict(config)}


def weights_digest(weights: list[Any]) -> str:
    """A short fingerprint of a model's weights: equal on every worker of a synchronous run."""
    digest = hashlib.sha256()
    for array in weights:
        digest.update(array.tobytes())
    return digest.hexdigest()[:16]


def _world(task: TaskInfo) -> str:
    if not task.cluster:
        return "1 process"
    return ", ".join(f"{len(addresses)} {role}{'' if len(addresses) == 1 or role == 'ps' else 's'}"
                     for role, addresses in task.cluster.items())


def _log(task: TaskInfo, message: str) -> None:
    """One line per task on stderr, for the job log (progress stays on the chief's stdout)."""
    print(f"hpc-train [{task.type} {task.index}]: {message}", file=sys.stderr, flush=True)


def _printer(task: TaskInfo) -> Any:
    """Progress goes to stdout on the chief only; other tasks stay quiet."""
    if task.is_chief:
        return lambda line: print(f"hpc-train: {line}", flush=True)
    return lambda line: None


def _remove_if_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    """`python -m hpc_train.train`: the same as `hpc-train train`."""
    from hpc_train.cli import main as cli_main

    return cli_main(["train", *(sys.argv[1:] if argv is None else argv)])
