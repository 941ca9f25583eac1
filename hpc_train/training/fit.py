"""`hpc_train.fit(...)`: the trainer, called from Python with the task's functions instead of a module.

The same code path as `hpc-train train --task`: the functions are checked as a
task module's are, and the run has every guarantee the trainer gives (TF_CONFIG
from the Slurm step, checkpoints, stop and requeue on Slurm's signals, exact
resume, metrics.json). Nothing here imports TensorFlow until the run starts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def fit(build_model: Callable[..., Any], train_dataset: Callable[..., Any],
        validation_dataset: Callable[..., Any] | None = None, *, final_metrics: Callable[..., Any] | None = None,
        config: str | Path | None = None, **settings: Any) -> int:
    """Train; return the exit code (0: done, 75: stopped and saved, run again to resume).

        import sys, hpc_train
        sys.exit(hpc_train.fit(build_model, train_dataset, strategy="multiworker", epochs=5,
                               output_dir="runs/mine"))

    `settings` are the keys of `hpc-train train --keys` (after `config`, a YAML file, if given);
    a wrong key or value raises HpcTrainError naming it.
    """
    from dataclasses import replace

    from hpc_train.config import load_config
    from hpc_train.config import replace as replace_checked
    from hpc_train.errors import HpcTrainError
    from hpc_train.training.trainer import run
    from hpc_train.training.usertask import from_functions

    if "task" in settings:
        raise HpcTrainError("hpc_train.fit: task= is not a setting here: the functions given are the task")

    name = f"{getattr(build_model, '__module__', 'fit')}.{getattr(build_model, '__qualname__', 'build_model')}"
    task = from_functions(f"hpc_train.fit({name})", build_model=build_model, train_dataset=train_dataset,
                          validation_dataset=validation_dataset, final_metrics=final_metrics)
    run_config = replace_checked(load_config(config), **settings)
    return run(replace(run_config, task=getattr(build_model, "__module__", None) or "fit"), user_task=task)
