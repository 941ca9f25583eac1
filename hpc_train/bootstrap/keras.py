"""Which Keras a rank's own command gets as `tf.keras`: tf-keras under the multi-task strategies, unless the user
chose.

TensorFlow 2.16 and later make `tf.keras` mean Keras 3, which cannot run
`model.fit` under MultiWorkerMirroredStrategy ("Attempt to convert a value
(PerReplica...)"), has no ParameterServerStrategy support, and renamed a
metric's `reset_states()` to `reset_state()`. TensorFlow's own multi-worker
tutorials fail both ways; with TF_USE_LEGACY_KERAS=1 and tf-keras installed
(of TensorFlow's minor version) `tf.keras` is tf-keras, and they run. So a
command started by hpc-train gets TF_USE_LEGACY_KERAS=1 when tf-keras fits,
unless the user set the variable or asked for Keras 3 (`--keras 3`).

`choose_keras` is pure (the versions installed are given); `installed_versions`
reads them from the package metadata, without importing TensorFlow.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata

from hpc_train.errors import HpcTrainError

VARIABLE = "TF_USE_LEGACY_KERAS"
CHOICES = ("auto", "2", "3")  # auto: tf-keras when it fits, else Keras 3 with a warning; 2: tf-keras or refuse
PACKAGES = ("tensorflow", "tf-keras", "keras")
_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class KerasChoice:
    """The variables to export, the words for the rank line, and a problem to say (one line with its fix)."""

    variables: dict[str, str] = field(default_factory=dict)
    description: str = ""  # "tf-keras 2.21.0", "Keras 3.15.1 (--keras 3)", ... ; "" without TensorFlow
    problem: str | None = None

    @property
    def legacy(self) -> bool:
        return self.variables.get(VARIABLE) == "1" or self.description.startswith("tf-keras")


def installed_versions() -> dict[str, str | None]:
    """The installed version of TensorFlow, tf-keras and Keras 3 (None: not installed), from package metadata."""
    versions: dict[str, str | None] = {}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def minor(version: str) -> str:
    """'2.21.0rc1' -> '2.21'."""
    match = re.match(r"(\d+)\.(\d+)", version)
    return f"{match.group(1)}.{match.group(2)}" if match else version


def fix_for(tensorflow: str) -> str:
    return f"pip install tf-keras~={minor(tensorflow)}.0"


def keras_problem(versions: Mapping[str, str | None]) -> str | None:
    """Why tf-keras cannot serve as tf.keras with this TensorFlow, with the fix; None when it can (or no TF)."""
    tensorflow, legacy = versions.get("tensorflow"), versions.get("tf-keras")
    if tensorflow is None:
        return None
    if legacy is None:
        return (f"tf-keras is not installed, so tf.keras is Keras 3, which cannot run model.fit under "
                f"MultiWorkerMirroredStrategy nor ParameterServerStrategy; {fix_for(tensorflow)}")
    if minor(legacy) != minor(tensorflow):
        return (f"tf-keras {legacy} does not match TensorFlow {tensorflow} (they must share a minor version); "
                f"{fix_for(tensorflow)}")
    return None


def choose_keras(wanted: str, environ: Mapping[str, str], versions: Mapping[str, str | None]) -> KerasChoice:
    """What a command under a multi-task strategy gets as tf.keras (pure)."""
    if wanted not in CHOICES:
        raise HpcTrainError(f"--keras {wanted!r}: expected one of {', '.join(CHOICES)}")
    tensorflow, legacy, keras3 = (versions.get(package) for package in PACKAGES)
    if VARIABLE in environ:  # the user's own choice stands
        chosen = environ[VARIABLE].strip().lower() in _TRUE
        which = f"tf-keras {legacy}" if chosen and legacy else f"Keras {keras3 or '3'}"
        return KerasChoice({}, f"{which} ({VARIABLE}={environ[VARIABLE]} as set)" if tensorflow else "")
    if tensorflow is None:
        return KerasChoice()  # no TensorFlow in this environment: nothing to choose
    if wanted == "3":
        return KerasChoice({}, f"Keras {keras3 or '3'} (--keras 3)")
    problem = keras_problem(versions)
    if problem is None:
        return KerasChoice({VARIABLE: "1"}, f"tf-keras {legacy}")
    if wanted == "2":
        raise HpcTrainError(f"--keras 2: {problem}")
    return KerasChoice({}, f"Keras {keras3 or '3'}", problem)


# Keras 3's known failures under the multi-task strategies, as they end a command's traceback, with what to do.
KNOWN_FAILURES = (
    (re.compile(r"Attempt to convert a value \(PerReplica"),
     "model.fit under MultiWorkerMirroredStrategy fails this way with Keras 3"),
    (re.compile(r"object has no attribute 'reset_states'"),
     "Keras 3 renamed a metric's reset_states() to reset_state()"),
)


def failure_hint(seen: int, description: str, tensorflow: str | None) -> str:
    """The one line a command's log ends with when it failed with Keras 3's known error number `seen`."""
    what = KNOWN_FAILURES[seen][1]
    fix = fix_for(tensorflow) if tensorflow else "pip install tf-keras (TensorFlow's minor version)"
    return (f"hpc-train: hint: {what}, and this command ran with {description or 'Keras 3'} as tf.keras: run it "
            f"with tf-keras instead ({fix}; leave {VARIABLE} unset and drop --keras 3), or port it to Keras 3")
