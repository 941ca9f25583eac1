"""A sweep element's values for TensorBoard's HParams view, in its run folder's `tensorboard/`.

`tensorboard --logdir runs/` then compares the elements of a sweep side by
side. The values are the settings the sweep varies: the element's script
exports each as HPC_TRAIN_SWEEP_<KEY>, and its index as HPC_TRAIN_TRIAL
(login/script.py). TensorBoard and TensorFlow are imported only to write them,
on a compute node: this module sits below the trainer and the CLI alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpc_train.config import TrainConfig

SWEEP_PREFIX = "HPC_TRAIN_SWEEP_"
TRIAL_VARIABLE = "HPC_TRAIN_TRIAL"


def tensorboard_dir(run_dir: Path) -> Path:
    """Where the chief's TensorBoard logs go, the HParams summary with them."""
    return Path(run_dir) / "tensorboard"


def swept_values(config: TrainConfig, environ: Mapping[str, str]) -> dict[str, Any]:
    """This run's swept settings, when it is an element of a sweep (HPC_TRAIN_SWEEP_<KEY>, set by its script)."""
    keys = [name[len(SWEEP_PREFIX):].lower() for name in environ if name.startswith(SWEEP_PREFIX)]
    values = {key: getattr(config, key) for key in sorted(keys) if hasattr(config, key)}
    return {key: value for key, value in values.items() if isinstance(value, (bool, int, float, str))}


def write_hparams(run_dir: Path, config: TrainConfig, environ: Mapping[str, str]) -> bool:
    """The HParams summary of this sweep element, into `tensorboard_dir(run_dir)`; False (nothing written) when
    the run is no element of a sweep."""
    values = swept_values(config, environ)
    if not values:
        return False
    import tensorflow as tf  # already imported and configured by the trainer that calls this
    from tensorboard.plugins.hparams import api as hp

    writer = tf.summary.create_file_writer(str(tensorboard_dir(run_dir)))
    with writer.as_default():
        hp.hparams(values, trial_id=environ.get(TRIAL_VARIABLE))
    writer.close()  # written now: a job's rank leaves without Python's teardown (training/outcome.py)
    return True
