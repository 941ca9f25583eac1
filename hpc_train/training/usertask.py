"""A task module: what to train, as functions the trainer calls (loading and calling them; no TensorFlow here).

A task module is a FILE.py or a dotted module name that defines

- `build_model()`: a compiled tf_keras model, called inside the strategy's scope;
- `train_dataset(input_context, batch_size)`: a `tf.data.Dataset` of per-replica batches;
- optionally `validation_dataset(input_context, batch_size)`: a finite dataset;
- optionally `final_metrics(model)`: figures for metrics.json's totals once training is done (called on the
  chief alone, with a copy of the trained model outside the strategy, so predict and evaluate work);
- optionally `describe()`: one line for the log, and `summary()`: fields for metrics.json.

A function that has a parameter named `config` is given the run's TrainConfig,
and a `train_dataset` with a `skip_batches` parameter seeks by itself (see
inputs.py). The built-in MNIST task (hpc_train.tasks.mnist) is one such module.

Errors in user code are the user's, told plainly: a module that cannot be
imported or lacks a function, or a function that returns something else than
expected (`checked_model`, `task_summary`, `final_metrics`), is refused with
one line naming the module, the function and what was expected; a user
function that raises ends the run with the user's message and a traceback
through the user's own frames only.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import sys
import sysconfig
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

from hpc_train.errors import HpcTrainError

REQUIRED = ("build_model", "train_dataset")
OPTIONAL = ("validation_dataset", "final_metrics", "describe", "summary")
# The positional parameters each function takes, besides the optional `config`.
PARAMETERS = {"build_model": (), "train_dataset": ("input_context", "batch_size"),
              "validation_dataset": ("input_context", "batch_size"), "final_metrics": ("model",),
              "describe": (), "summary": ()}
_HPC_TRAIN_DIR = str(Path(__file__).resolve().parents[1])
_LIBRARY_DIRS = tuple({sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")})


class TaskError(HpcTrainError):
    """A task module that cannot be used as it is: not found, not importable, a function missing or
    of the wrong form, or one that returned something else than expected."""


class UserCodeError(HpcTrainError):
    """A user function raised: the user's message, and the traceback through the user's frames (`details`)."""

    def __init__(self, message: str, details: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.details = details
        self.exit_code = exit_code


@dataclass(frozen=True)
class TaskModule:
    """The functions of a task module, by name, and the name to call it by in messages."""

    name: str
    functions: dict[str, Callable[..., Any]]

    def has(self, function: str) -> bool:
        return function in self.functions

    def accepts(self, function: str, parameter: str) -> bool:
        return parameter in _parameters(self.functions[function])

    def call(self, function: str, *args: Any, config: Any = None, **keywords: Any) -> Any:
        """Call a task function; `config` is passed when it takes one. Its exceptions become the user's."""
        called = self.functions[function]
        if config is not None and "config" in _parameters(called):
            keywords["config"] = config
        try:
            return called(*args, **keywords)
        except HpcTrainError:
            raise  # already one line with its fix (the built-in tasks raise these)
        except Exception as error:  # the user's code failed: say so, with the user's frames
            raise user_error(f"{self.name}: {function}() raised", error) from None

    def describe_call(self, function: str) -> str:
        return f"{self.name}: {function}({', '.join(PARAMETERS[function])})"


def checked_model(task: TaskModule, model: Any, model_class: type) -> Any:
    """build_model()'s model, if it is a compiled `model_class` (tf_keras.Model: passed in, so that no
    TensorFlow is imported here)."""
    where = task.describe_call("build_model")
    if not isinstance(model, model_class):
        kind = "a Keras 3 model" if type(model).__module__.startswith("keras") else f"a {type(model).__name__}"
        raise TaskError(f"{where} returned {kind}, not a tf_keras model; build it with `import tf_keras as "
                        "keras` (Keras 3 cannot train under these strategies) and return it compiled")
    if model.optimizer is None or not getattr(model, "compiled_loss", None):
        raise TaskError(f"{where} returned a model that is not compiled; call model.compile(optimizer=..., "
                        "loss=...) before returning it")
    return model


def task_summary(task: TaskModule, config: Any) -> dict[str, Any]:
    """The task's own fields for metrics.json (summary()), checked before any training, on every rank."""
    if not task.has("summary"):
        return {}
    summary = task.call("summary", config=config)
    if not isinstance(summary, dict) or not all(isinstance(key, str) for key in summary):
        raise TaskError(f"{task.describe_call('summary')} returned a {type(summary).__name__}; "
                        "return a dict of name -> value for metrics.json")
    try:
        json.dumps(summary)
    except (TypeError, ValueError) as error:
        raise TaskError(f"{task.describe_call('summary')} returned what metrics.json cannot hold ({error}); "
                        "return numbers, strings, and lists or dicts of them") from None
    return summary


def final_metrics(task: TaskModule, trained: Any, config: Any) -> dict[str, int | float]:
    """The task's final figures (final_metrics(model)), as plain numbers, of a copy of the `trained` model.

    Called on the chief alone: a copy outside the strategy, since the distributed model's predict and evaluate
    would wait for workers that have finished.
    """
    local = task.call("build_model", config=config)
    local.set_weights(trained.get_weights())
    final = task.call("final_metrics", local, config=config)
    where = task.describe_call("final_metrics")
    if not isinstance(final, dict) or not all(isinstance(key, str) for key in final):
        raise TaskError(f"{where} returned a {type(final).__name__}; return a dict of name -> number")
    numbers: dict[str, int | float] = {}
    for name, value in final.items():  # numpy and 0-d tensor values too; metrics.json and state.json hold numbers
        try:
            numbers[name] = value if isinstance(value, int) and not isinstance(value, bool) else float(value)
        except (TypeError, ValueError):
            raise TaskError(f"{where} returned {name!r}: a {type(value).__name__}, not a number; return a dict of "
                            "name -> number") from None
    return numbers


def from_functions(name: str, **functions: Callable[..., Any] | None) -> TaskModule:
    """A task from functions given directly (hpc_train.fit), checked like a module's."""
    given = {key: value for key, value in functions.items() if value is not None}
    unknown = sorted(set(given) - set(PARAMETERS))
    if unknown:
        raise TaskError(f"{name}: unknown task function(s) {', '.join(unknown)}; known: {', '.join(PARAMETERS)}")
    return _checked(name, given)


def load_task(spec: str) -> TaskModule:
    """Import the task module `spec` (FILE.py or a dotted name) and check its functions."""
    module = _import_file(spec) if is_file_spec(spec) else _import_dotted(spec)
    functions = {name: getattr(module, name) for name in (*REQUIRED, *OPTIONAL) if hasattr(module, name)}
    return _checked(f"task {spec}", functions)


def is_file_spec(spec: str) -> bool:
    """A task named by path (`task.py`, `dir/task.py`), not by a dotted module name."""
    return spec.endswith(".py") or "/" in spec


def _checked(name: str, functions: dict[str, Any]) -> TaskModule:
    for required in REQUIRED:
        if required not in functions:
            raise TaskError(f"{name} defines no {required}(); a task module needs build_model() and "
                            "train_dataset(input_context, batch_size) (hpc-train init DIR writes an example)")
    for function, value in functions.items():
        wanted = f"{function}({', '.join(PARAMETERS[function])})"
        if not callable(value):
            raise TaskError(f"{name}: {function} is a {type(value).__name__}, not a function; define {wanted}")
        if not _takes(value, len(PARAMETERS[function]), "config" in _parameters(value)):
            raise TaskError(f"{name}: {function}{_signature(value)} cannot be called as {wanted}; "
                            f"define it as def {wanted}:")
    return TaskModule(name, dict(functions))


def _import_file(spec: str) -> ModuleType:
    path = Path(spec).expanduser().resolve()
    if not path.is_file():
        raise TaskError(f"task {spec}: no such file ({path}); give a FILE.py path or a dotted module name")
    name = path.stem if path.stem.isidentifier() else "hpc_train_user_task"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise TaskError(f"task {spec}: not a Python file Python can import; name it FILE.py")
    module = importlib.util.module_from_spec(module_spec)
    # Its own folder first, so that the task can import the modules beside it; registered before it
    # runs, as an import would, so that dataclasses and pickling find it.
    sys.path.insert(0, str(path.parent))
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as error:
        sys.modules.pop(name, None)
        raise _import_error(spec, error) from None
    return module


def _import_dotted(spec: str) -> ModuleType:
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as error:
        if error.name is not None and (spec == error.name or spec.startswith(f"{error.name}.")):
            raise TaskError(f"task {spec}: no module named {error.name!r} on the Python path; give a FILE.py "
                            "path, or install the module (or add its folder to PYTHONPATH)") from None
        raise _import_error(spec, error) from None
    except Exception as error:
        raise _import_error(spec, error) from None


def _import_error(spec: str, error: Exception) -> HpcTrainError:
    if isinstance(error, SyntaxError):
        return TaskError(f"task {spec}: syntax error at {error.filename}:{error.lineno}: {error.msg}; fix the file")
    # Refused like a missing function (exit 2), with the user's traceback to show where.
    return user_error(f"task {spec} cannot be imported: importing it raised", error, exit_code=2)


def user_error(context: str, error: BaseException, exit_code: int = 1) -> UserCodeError:
    """`context` ValueError: message, with the traceback cut down to the user's own frames."""
    message = str(error).strip().splitlines()
    first = f": {message[0]}" if message else ""
    return UserCodeError(f"{context} {type(error).__name__}{first}", user_traceback(error), exit_code)


def user_traceback(error: BaseException) -> str:
    """Python's traceback of `error`, keeping only frames outside hpc-train, the standard library
    and installed packages (TensorFlow, Keras): the frames of the user's own code."""
    frames = [frame for frame in traceback.extract_tb(_traceback(error)) if _is_users(frame.filename)]
    lines = ["Traceback (most recent call last, the task's own code only):\n", *traceback.format_list(frames),
             *traceback.format_exception_only(type(error), error)]
    return "".join(lines).rstrip("\n")


def _traceback(error: BaseException) -> TracebackType | None:
    return error.__traceback__


def _is_users(filename: str) -> bool:
    if filename.startswith("<"):  # <frozen importlib._bootstrap>, <string>
        return False
    resolved = str(Path(filename).resolve()) if Path(filename).is_absolute() else filename
    return not resolved.startswith((_HPC_TRAIN_DIR, *_LIBRARY_DIRS)) or "/examples/" in resolved


def _parameters(function: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(function).parameters)
    except (TypeError, ValueError):  # a builtin without a signature: assume nothing optional
        return {}


def _takes(function: Callable[..., Any], positional: int, with_config: bool) -> bool:
    """Whether `function` can be called with this many positional arguments (and `config`, if it takes it)."""
    try:
        inspect.signature(function).bind(*range(positional), **({"config": None} if with_config else {}))
    except TypeError:
        return False
    except ValueError:
        return True  # no signature to check
    return True


def _signature(function: Callable[..., Any]) -> str:
    try:
        return str(inspect.signature(function))
    except (TypeError, ValueError):
        return "(...)"
