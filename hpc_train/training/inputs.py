"""A task's datasets as the trainer feeds them: checked, sized, repeated and resumed where they stopped.

`train_dataset(input_context, batch_size)` returns one epoch of one input
pipeline's per-replica batches. The trainer repeats it into an endless stream
and, on resume, skips the batches that pipeline had already read: the data
position resumes exactly when the function returns the same batches in the same
order every time it is called (a seeded shuffle over a finite dataset: with
`reshuffle_each_iteration`, each pass is still fixed by the seed and the pass
number). Skipping reads the skipped batches; a `train_dataset` with a
`skip_batches=None` parameter seeks by itself instead: called with a number, it
returns the endless stream after that many batches; called without, one epoch
(the built-in MNIST task does).

Every rank checks its datasets before training, the same way on every rank, so
a wrong one fails the whole job at once, naming the function and the fix.

Each pipeline's one-epoch dataset is built once per process to count the
steps and check the model's input (`EpochDatasets`). The training stream is
built afresh for each stretch of training: a dataset object iterated again
would continue its seeded reshuffle where the last iteration left it, and the
resumed order would no longer be the uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hpc_train.training.keras import keras, tf
from hpc_train.training.served import training_stream
from hpc_train.training.usertask import TaskError, TaskModule

DatasetFn = Callable[["tf.distribute.InputContext | None"], tf.data.Dataset]


@dataclass(frozen=True)
class Pipelines:
    """The job's input pipelines, one per worker, and how a step reads them.

    In step: every step takes a batch from every pipeline (MultiWorkerMirrored, one process).
    `take_turns`: each step runs on one worker and takes a batch from its pipeline alone
    (ParameterServerStrategy), so an epoch over all the data has as many steps as all pipelines' batches.
    """

    count: int
    replicas: int
    take_turns: bool = False

    def contexts(self) -> list[tf.distribute.InputContext]:
        return [tf.distribute.InputContext(self.count, pipeline, self.replicas) for pipeline in range(self.count)]

    @property
    def local_replicas(self) -> int:
        return max(1, self.replicas // self.count)

    def steps(self, fewest_batches: int) -> int:
        """Steps in which every pipeline reads `fewest_batches` batches."""
        return fewest_batches // self.local_replicas * (self.count if self.take_turns else 1)


class EpochDatasets:
    """One task function's one-epoch dataset per input pipeline, built (and checked) once, when first asked for."""

    def __init__(self, task: TaskModule, config: Any, function: str) -> None:
        self.task, self.config, self.function = task, config, function
        self._built: dict[tuple[int, int, int], tf.data.Dataset] = {}

    def get(self, context: tf.distribute.InputContext) -> tf.data.Dataset:
        key = (context.input_pipeline_id, context.num_input_pipelines, context.num_replicas_in_sync)
        if key not in self._built:
            self._built[key] = _dataset(self.task, self.function, self.config, context)
        return self._built[key]


def checked_dataset(task: TaskModule, function: str, dataset: Any, batch_size: int) -> tf.data.Dataset:
    """The dataset a task function returned, refused with one line when it cannot be trained on."""
    where = task.describe_call(function)
    if not isinstance(dataset, tf.data.Dataset):
        raise TaskError(f"{where} returned a {type(dataset).__name__}, not a tf.data.Dataset; return "
                        "tf.data.Dataset.from_tensor_slices((features, labels)).batch(batch_size) or similar")
    spec = dataset.element_spec
    if not isinstance(spec, tuple) or len(spec) not in (2, 3):
        raise TaskError(f"{where} yields {_describe_spec(spec)}; expected (features, labels) or "
                        "(features, labels, sample_weights) batches")
    shapes = [tensor.shape for tensor in tf.nest.flatten(spec)
              if getattr(tensor, "shape", None) is not None and tensor.shape.rank is not None]
    if any(shape.rank == 0 for shape in shapes):  # a label of its own, not a batch of them
        raise TaskError(f"{where} yields single values, not batches; batch the dataset with "
                        f".batch(batch_size) (batch_size is {batch_size} per replica)")
    sizes = {shape[0] for shape in shapes if shape[0] is not None}
    # Training batches must be the size the global batch (and learning rate) assume; validation's may differ.
    if function == "train_dataset" and sizes - {batch_size}:
        raise TaskError(f"{where} yields batches of {min(sizes - {batch_size})}, but batch_size is {batch_size} "
                        "per replica; batch with the batch_size argument hpc-train passes")
    return dataset


def check_model_fits(task: TaskModule, model: Any, dataset: tf.data.Dataset) -> None:
    """Refuse features whose shape the model's input cannot take (forgotten `.batch`, wrong width)."""
    inputs = getattr(model, "inputs", None)
    features = dataset.element_spec[0]
    if not inputs or len(inputs) != 1 or not isinstance(features, tf.TensorSpec):
        return  # several or unbuilt inputs: Keras checks them on the first step
    expected = inputs[0].shape
    if features.shape.rank is not None and expected.rank is not None and features.shape.rank == expected.rank - 1:
        raise TaskError(f"{task.describe_call('train_dataset')} yields unbatched features of shape "
                        f"{_shape(features.shape)} for a model that takes {_shape(expected)}; batch the dataset "
                        "with .batch(batch_size)")
    if not features.shape[1:].is_compatible_with(expected[1:]):
        raise TaskError(f"{task.describe_call('train_dataset')} yields features of shape {_shape(features.shape)}, "
                        f"but the model from build_model() takes {_shape(expected)}; make them agree")


def epoch_steps(task: TaskModule, config: Any, pipelines: Pipelines, epochs: EpochDatasets | None = None) -> int:
    """Steps per epoch: `steps_per_epoch` if set, else the fewest batches any pipeline's epoch holds."""
    return _steps(task, config, pipelines, "train_dataset", "steps_per_epoch", epochs)


def validation_steps(task: TaskModule, config: Any, pipelines: Pipelines,
                     epochs: EpochDatasets | None = None) -> int | None:
    """Validation steps per epoch (the same on every rank), or None when the task has no validation data."""
    if not task.has("validation_dataset"):
        return None
    return _steps(task, config, pipelines, "validation_dataset", "validation_steps", epochs)


def _steps(task: TaskModule, config: Any, pipelines: Pipelines, function: str, setting: str,
           epochs: EpochDatasets | None) -> int:
    """The setting's steps if set, else the fewest batches any pipeline's epoch of `function` holds."""
    if getattr(config, setting):
        return getattr(config, setting)
    epochs = epochs or EpochDatasets(task, config, function)
    counts = [_batches(epochs, context) for context in pipelines.contexts()]
    return _at_least_one(task, function, pipelines.steps(_fewest(task, function, counts, setting)))


def training_fn(task: TaskModule, config: Any, batches_done: int) -> DatasetFn:
    """Each pipeline's endless stream of training batches, after the `batches_done` it had read."""

    def stream(context: tf.distribute.InputContext, skipped: int) -> tf.data.Dataset:
        if task.accepts("train_dataset", "skip_batches"):
            return _dataset(task, "train_dataset", config, context, skip_batches=skipped)
        dataset = _dataset(task, "train_dataset", config, context).repeat().skip(skipped)
        # Said out loud: with a stream of unknown length, MultiWorkerMirrored would check with every
        # worker before each step whether some ran out of data (a cross-worker all-reduce per step).
        return dataset.apply(tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY))

    def make(context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        # Through the job's data service when it has one (served.py), else this pipeline's own stream.
        return training_stream(stream, context or tf.distribute.InputContext(), batches_done)

    return make


def validation_fn(task: TaskModule, config: Any) -> DatasetFn:
    """Each pipeline's validation batches, repeated so a fixed step count always finds data."""

    def make(context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        return _dataset(task, "validation_dataset", config, context or tf.distribute.InputContext()).repeat()

    return make


def for_fit(make: DatasetFn, strategy_name: str) -> Any:
    """What model.fit takes: the dataset itself in one process, else a function every worker calls."""
    if strategy_name == "none":
        return make(None)
    return keras.utils.experimental.DatasetCreator(make)


def _dataset(task: TaskModule, function: str, config: Any, context: tf.distribute.InputContext,
             **keywords: Any) -> tf.data.Dataset:
    dataset = task.call(function, context, config.batch_size, config=config, **keywords)
    return checked_dataset(task, function, dataset, config.batch_size)


def _batches(epochs: EpochDatasets, context: tf.distribute.InputContext) -> int | None:
    """Batches in one pipeline's epoch; None when endless or of unknown length."""
    # (A train_dataset that seeks by itself gives one epoch when called without skip_batches.)
    count = int(epochs.get(context).cardinality())
    if count == 0:
        raise TaskError(f"{epochs.task.describe_call(epochs.function)} gave input pipeline {context.input_pipeline_id} of "
                        f"{context.num_input_pipelines} no batch; give it more data, or a smaller batch_size")
    return count if count > 0 else None


def _fewest(task: TaskModule, function: str, counts: list[int | None], setting: str) -> int:
    if any(count is None for count in counts):
        raise TaskError(f"{task.describe_call(function)} is endless or of unknown length (a repeat, a filter, "
                        f"TFRecord files), so hpc-train cannot tell how many steps an epoch has: set {setting} "
                        "(--set {setting}=N), or end the dataset with "
                        ".apply(tf.data.experimental.assert_cardinality(BATCHES))".replace("{setting}", setting))
    return min(count for count in counts if count is not None)


def _at_least_one(task: TaskModule, function: str, steps: int) -> int:
    if steps < 1:
        raise TaskError(f"{task.describe_call(function)} gives too few batches for one step of all the replicas; "
                        "give it more data, or a smaller batch_size")
    return steps


def _describe_spec(spec: Any) -> str:
    if isinstance(spec, tuple):
        return f"tuples of {len(spec)}"
    if isinstance(spec, dict):
        return f"dicts of {', '.join(map(str, spec))}"
    return f"single {type(spec).__name__}s"


def _shape(shape: tf.TensorShape) -> str:
    return "(" + ", ".join("None" if dim is None else str(dim) for dim in shape.as_list()) + ")"
