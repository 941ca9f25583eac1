"""The training configuration: one frozen, typed record, from YAML and `--set key=value`.

Shared by the trainer and the submitter. Unknown keys, wrong types and values
out of range are refused with one line that names the key, echoes the value and
lists what is valid. Nothing here imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from hpc_train.errors import HpcTrainError

StrategyName = Literal["none", "mirrored", "multiworker", "parameter_server"]
# A job's choices, each listed once: the job request checks them, and the options offer them.
JOB_STRATEGIES = ("multiworker", "parameter_server")  # a Slurm job's strategies (its tasks form one cluster)
KERAS_CHOICES = ("auto", "2", "3")  # what a user's command gets as tf.keras (--keras)
COMMAND_SIGNALS = ("USR1", "TERM")  # the signal the time-limit warning reaches a user's command as
# A job's failed step is retried this many times by default (--max-retries, max_retries).
DEFAULT_MAX_RETRIES = 3
# A job stopped by its time-limit warning requeues itself at most this many times by default (max_requeues).
DEFAULT_MAX_REQUEUES = 5
BUILTIN_TASK = "hpc_train.tasks.mnist"
# The data directory of a run that names none (data_dir_default).
DATA_DIR_VARIABLE = "HPC_TRAIN_DATA_DIR"
DEFAULT_OUTPUT_DIR = "runs/mnist"  # the built-in task's; a task module's is named after it (default_output_dir)
# The settings only the built-in MNIST task reads; a user's task module has its own model and data.
BUILTIN_TASK_SETTINGS = ("model", "data_dir", "train_images", "validation_images")


class ConfigError(HpcTrainError):
    """A configuration file or override that cannot be used as it is."""


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training run needs; every field has a working default."""

    # Each field's comment is what `hpc-train train --keys` says of it (key_descriptions).

    # How the replicas train together: none (one device), mirrored (this machine's GPUs), multiworker (every task
    # of a job in sync), parameter_server (a chief, parameter servers and workers).
    strategy: StrategyName = "none"
    # What to train: a task module (a FILE.py path or a dotted module name) defining build_model() and
    # train_dataset(input_context, batch_size); the default is the built-in MNIST task.
    task: str = BUILTIN_TASK
    # The built-in MNIST task's model: cnn (a small convolutional network) or deep (a deeper one).
    model: Literal["cnn", "deep"] = "cnn"
    # The built-in MNIST task's optimizer (a task module compiles its own; the starter's reads learning_rate).
    optimizer: Literal["adam", "sgd", "rmsprop"] = "adam"
    # The optimizer's learning rate (the built-in task's, and any task module that reads it).
    learning_rate: float = 0.001
    # Passes over the training data; a run resumed from its checkpoints trains on up to this many.
    epochs: int = 5
    # Optimizer steps per epoch; empty: one pass over the training data (the task's train_dataset).
    steps_per_epoch: int | None = None
    # Validation steps after each epoch; empty: one pass over the task's validation_dataset.
    validation_steps: int | None = None
    # Images per replica per step; the global batch is this times the replicas.
    batch_size: int = 64
    # Images per step in all, shared by the replicas of each attempt (batch_size ignored); a job of a node range
    # (--nodes MIN-MAX) fixes it at submit, so every size trains the same; empty: batch_size x the replicas.
    global_batch: int | None = None
    # Where MNIST is: a directory of IDX .gz files or holding mnist.npz; empty: $HPC_TRAIN_DATA_DIR, else Keras' cache.
    data_dir: str | None = None
    # Training images to use (from the start); empty: all there are.
    train_images: int | None = None
    # Held-out images for validation, from the end of the images when MNIST's training
    # set is not there; with the training set, validation uses the test set.
    validation_images: int = 2000
    # Where the chief writes checkpoints, TensorBoard events, metrics.json and the model; when none is given,
    # runs/mnist for the built-in task, runs/STEM for a task module (runs/task for myproject/task.py).
    output_dir: str = DEFAULT_OUTPUT_DIR
    # Parameter servers under parameter_server.
    num_ps: int = 1
    # How multiworker's replicas sum their gradients: auto (TensorFlow's choice), ring, or nccl (GPUs).
    collective: Literal["auto", "ring", "nccl"] = "auto"
    # Training steps run per call into TensorFlow: fewer Python round trips.
    steps_per_execution: int = 32
    # Keras' dtype policy; auto: mixed_bfloat16 on CPUs with bf16 units (AMX, AVX512-BF16) and GPUs of compute
    # capability 8.0 or newer, mixed_float16 on 7.x GPUs, float32 elsewhere (training/precision.py).
    precision: Literal["auto", "float32", "mixed_bfloat16", "mixed_float16"] = "auto"
    # TensorFlow's inter-op threads; empty: one per core the task may use, at least 2 for parameter_server.
    inter_op_threads: int | None = None
    # Keep freed memory in the process for the next step, rather than return it to the kernel
    # and fault it back in (glibc's mallopt): twice the images/s on a CPU without oneDNN.
    tune_malloc: bool = True
    # Seconds the tasks of a distributed job wait for each other at start before failing.
    startup_timeout: int = 300
    # At most this share of the training time goes to epoch-end checkpoints: an epoch's end is saved once
    # the last save's duration / share seconds have passed since it (the first and last epoch, and every
    # stop, always are); 0: after every epoch.
    checkpoint_share: float = 0.03
    # Also save at a step boundary this often, so that a crash loses at most that much training; empty: as often
    # as checkpoint_share allows (the last save's duration / share), from 1 to at most 15 minutes apart; 0: only
    # at epoch ends.
    checkpoint_minutes: float | None = None
    # Times a job stopped by Slurm's warning signal requeues itself (scontrol requeue); 0: never.
    max_requeues: int = DEFAULT_MAX_REQUEUES
    # In a sweep: stop an element early through the sweep's Optuna study: halving (asynchronous successive
    # halving: the worse half stops at epochs 1, 2, 4, 8, ...), median (worse than the median of the finished
    # trials at the same epoch), hyperband; none: never.
    prune: Literal["none", "halving", "median", "hyperband"] = "none"
    # What pruning (and hpc-train report) compares: a figure of the epochs' logs; empty: val_accuracy where there
    # is one, else val_loss. A loss (or error) is minimised, anything else maximised.
    objective: str | None = None
    # Times a job whose step failed (a task died, hung or lost a peer; a node lost) is retried on other nodes,
    # resuming from its last checkpoint; 0: never. Counted apart from max_requeues.
    max_retries: int = DEFAULT_MAX_RETRIES
    # Minutes without progress on any rank (the chief's beat; a command's logs or heartbeat) after which the job's
    # watchdog records every rank's stacks and ends the attempt as hung, for a retry; empty: 20 times the longest
    # gap between beats, at least 10 (so a slow but moving run is never a hang); at least 1; 0: never.
    hang_minutes: float | None = None
    # The random seed of the weights and the data's order: the same seed, the same run.
    seed: int = 0
    # mlflow: one MLflow run per job, through requeues and retries (pip install 'hpc-train[mlflow]'); none: none.
    track: Literal["none", "mlflow"] = "none"
    # With track: mlflow, the tracking server or store; empty: $MLFLOW_TRACKING_URI, else runs/mlflow.db.
    tracking_uri: str | None = None
    # With track: mlflow, the experiment; empty: the job's name.
    experiment: str | None = None

    def __post_init__(self) -> None:
        for name, field_type in _field_types().items():
            _check_type(name, getattr(self, name), field_type)
        _check_ranges(self)

    @classmethod
    def valid_keys(cls) -> list[str]:
        return [field.name for field in dataclasses.fields(cls)]


_POSITIVE = ("epochs", "batch_size", "steps_per_execution", "num_ps", "steps_per_epoch", "validation_steps",
             "train_images", "inter_op_threads", "startup_timeout", "global_batch")


def _check_ranges(config: TrainConfig) -> None:
    for name in _POSITIVE:
        value = getattr(config, name)
        if value is not None and value < 1:
            raise ConfigError(f"{name}: must be 1 or more, got {value!r}")
    if not 0 <= config.checkpoint_share < 1:
        raise ConfigError(f"checkpoint_share: must be from 0 (save every epoch) to below 1, got "
                          f"{config.checkpoint_share!r}")
    if not config.learning_rate > 0:
        raise ConfigError(f"learning_rate: must be more than 0, got {config.learning_rate!r}")
    if config.hang_minutes is not None and 0 < config.hang_minutes < 1:
        raise ConfigError(f"hang_minutes: must be 0 (off) or 1 or more, got {config.hang_minutes!r}")
    for name in ("max_requeues", "max_retries", "checkpoint_minutes", "hang_minutes"):
        if (getattr(config, name) or 0) < 0:
            raise ConfigError(f"{name}: must be 0 or more, got {getattr(config, name)!r}")
    if config.validation_images < 1:
        raise ConfigError(f"validation_images: must be 1 or more, got {config.validation_images!r}")


# A job's YAML may hold a sweep (render and submit run it as a job array, spec/sweep.py), not a setting.
SWEEP_KEY = "sweep"
# ... and a `job:` section: options of the job request that render and submit read (login/jobsection.py).
JOB_KEY = "job"


def data_dir_default(environ: Mapping[str, str]) -> str | None:
    """HPC_TRAIN_DATA_DIR: the data directory of every run that names none (train, submit, render, --local, the
    slurm/*.sh scripts); None when unset or empty (pure)."""
    return environ.get(DATA_DIR_VARIABLE) or None


def load_config(path: str | Path | None = None, overrides: Sequence[str] = (), sweep_allowed: bool = False,
                data_dir: str | None = None) -> TrainConfig:
    """Defaults, then the YAML file, then each `key=value` override, in that order. `sweep_allowed`: a `sweep:`
    section in the file is left to the caller (read_sweep), not refused. `data_dir`: the data directory when
    neither the file nor an override gives one (data_dir_default: HPC_TRAIN_DATA_DIR's)."""
    values: dict[str, Any] = dict(read_yaml(Path(path))) if path is not None else {}
    source = str(path) if path is not None else "the defaults"
    if SWEEP_KEY in values:
        if not sweep_allowed:
            raise ConfigError(f"{path}: a sweep runs as a job array: use it with hpc-train render or submit, or "
                              "drop its 'sweep:' section to train once")
        del values[SWEEP_KEY]
    if JOB_KEY in values:
        if not sweep_allowed:
            raise ConfigError(f"{path}: its 'job:' section holds render's and submit's options (the job's, not "
                              "training settings): use it with hpc-train render or submit, or drop it to train here")
        del values[JOB_KEY]
    _refuse_unknown(values, source)
    if path is not None:
        values = _task_path_from(Path(path).parent, values)
    for override in overrides:
        key, text = _split_override(override)
        _refuse_unknown({key: text}, "--set")
        values[key] = _override_value(key, text)
    values = _task_path_from(Path.cwd(), _coerce_numbers(values))
    if values.get("data_dir") is None and data_dir:
        values["data_dir"] = data_dir
    if "output_dir" not in values and isinstance(values.get("task"), str):
        values["output_dir"] = default_output_dir(values["task"])
    return TrainConfig(**values)


def default_output_dir(task: str) -> str:
    """Where a run writes unless told: runs/mnist for the built-in task, runs/STEM for a task module
    (myproject/task.py, my_package.task: runs/task), so that one task never resumes another's checkpoints (pure)."""
    if task == BUILTIN_TASK:
        return DEFAULT_OUTPUT_DIR
    return f"runs/{Path(task).stem if task.endswith('.py') or '/' in task else task.rpartition('.')[2]}"


def read_sweep(path: str | Path | None) -> Any:
    """The YAML file's `sweep:` section, or None."""
    return None if path is None else read_yaml(Path(path)).get(SWEEP_KEY)


def setting_value(key: str, text: str, source: str = "--set") -> Any:
    """One setting's value from its text, as `--set key=text` reads it (a known key; a number field's number)."""
    _refuse_unknown({key: text}, source)
    return _coerce_numbers({key: _override_value(key, text)})[key]


def _task_path_from(folder: Path, values: dict[str, Any]) -> dict[str, Any]:
    """A task given as a relative FILE.py, made absolute from `folder`: the YAML file's, or the current
    one for --set and --task. A job then finds it wherever its tasks start."""
    task = values.get("task")
    if isinstance(task, str) and task.endswith(".py") and not Path(task).expanduser().is_absolute():
        return {**values, "task": str((folder / Path(task)).resolve())}
    if isinstance(task, str) and task.startswith("~"):
        return {**values, "task": str(Path(task).expanduser())}
    return values


def replace(config: TrainConfig, **changes: Any) -> TrainConfig:
    """A copy with some fields changed, validated like any other config."""
    _refuse_unknown(changes, "the changes")
    return dataclasses.replace(config, **changes)


def key_descriptions(source: str) -> dict[str, str]:
    """Each TrainConfig field's comment, as one line, from the module's source (pure): what `--keys` prints."""
    described: dict[str, str] = {}
    comment: list[str] = []
    for line in source[source.index("class TrainConfig"):].splitlines()[1:]:
        text = line.strip()
        if text.startswith("#"):
            comment.append(text.lstrip("# "))
        elif (field := re.match(r"(\w+): ", text)) and line.startswith("    ") and not line.startswith("     "):
            described[field.group(1)] = " ".join(comment)
            comment = []
        elif text.startswith(("def ", "@")):
            break
        else:
            comment = []
    return described


def to_dict(config: TrainConfig) -> dict[str, Any]:
    return dataclasses.asdict(config)


def applying_settings(config: TrainConfig) -> dict[str, Any]:
    """The settings that apply to this run's task (metrics.json): the built-in task's own left out for another."""
    settings = to_dict(config)
    if config.task != BUILTIN_TASK:
        for name in BUILTIN_TASK_SETTINGS:
            del settings[name]
    return settings


def read_yaml(path: Path) -> Mapping[str, Any]:
    """A YAML file's top-level mapping; one line for a file that cannot be read or is not one."""
    try:
        text = path.read_text()
    except OSError as error:
        raise ConfigError(f"cannot read config {str(path)!r}: {error.strerror}; check the --config path") from None
    try:
        values = yaml.safe_load(text)
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        problem = getattr(error, "problem", None) or "syntax error"
        raise ConfigError(f"{path}: not valid YAML{at} ({problem}); fix the file's syntax") from None
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: expected 'key: value' lines at the top level, got a {type(values).__name__}")
    return values


def _split_override(override: str) -> tuple[str, str]:
    key, equals, text = override.partition("=")
    if not equals or not key.strip():
        raise ConfigError(f"--set {override!r}: expected key=value, e.g. --set epochs=3")
    return key.strip(), text


def _override_value(key: str, text: str) -> Any:
    """The value of `--set key=text`: text as given for text fields (a path may hold ' #'),
    YAML's reading (numbers, true/false, null) for the others."""
    options = _options(_field_types()[key])
    if str in options or any(isinstance(option, str) for option in _literal_choices(options)):
        return None if type(None) in options and text.strip() in ("", "null", "~") else text
    try:
        return yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError:
        return text  # not a YAML scalar: the type check names the problem


def _literal_choices(options: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(choice for option in options if typing.get_origin(option) is Literal
                 for choice in typing.get_args(option))


def _coerce_numbers(values: Mapping[str, Any]) -> dict[str, Any]:
    """YAML 1.1 reads `1e-3` as text; a number field takes it as the number it means."""
    coerced = dict(values)
    for name, field_type in _field_types().items():
        value = coerced.get(name)
        if isinstance(value, str) and float in _options(field_type):
            try:
                coerced[name] = float(value)
            except ValueError:
                pass  # the type check names the problem
    return coerced


def _options(field_type: Any) -> tuple[Any, ...]:
    """The types a field takes: the members of `int | None`, or the type itself."""
    if typing.get_origin(field_type) in (typing.Union, types.UnionType):
        return typing.get_args(field_type)
    return (field_type,)


def _refuse_unknown(values: Mapping[str, Any], source: str) -> None:
    valid = TrainConfig.valid_keys()
    for key in values:
        if key not in valid:
            close = difflib.get_close_matches(str(key), valid, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown key {str(key)!r} in {source}{hint}; valid keys: {', '.join(valid)}")


def _field_types() -> dict[str, Any]:
    return typing.get_type_hints(TrainConfig)


def _check_type(name: str, value: Any, expected: Any) -> None:
    """Refuse a value of the wrong type, naming the key and what it takes."""
    if _matches(value, expected):
        return
    raise ConfigError(f"{name}: expected {_describe(expected)}, got {value!r}")


def _matches(value: Any, expected: Any) -> bool:
    origin = typing.get_origin(expected)
    if origin is Literal:
        return value in typing.get_args(expected)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, option) for option in _options(expected))
    if expected is type(None):
        return value is None
    if expected is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, expected)


def _describe(expected: Any) -> str:
    origin = typing.get_origin(expected)
    if origin is Literal:
        return "one of " + ", ".join(map(str, typing.get_args(expected)))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(option) for option in _options(expected))
    return {int: "a whole number", float: "a number", str: "text", bool: "true or false",
            type(None): "empty (null)"}.get(expected, getattr(expected, "__name__", str(expected)))
