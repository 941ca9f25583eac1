"""Train a task (the built-in MNIST, or your own task module) with any strategy.

    hpc-train train --data-dir ../shared/data/mnist                 # the built-in MNIST task
    hpc-train train --task my_task.py --set epochs=3                # your model and data (see hpc-train init)
    hpc-train init myproject                               # a starter project to edit: task.py, config.yaml
    hpc-train train --config myproject/config.yaml --set epochs=3
    srun hpc-train train --set strategy=multiworker        # TF_CONFIG from the Slurm step
    python -m hpc_train.train ...                          # the same

Settings apply in order: defaults, --config, --task/--data-dir/--output-dir, --set.
A task module defines build_model() and train_dataset(input_context, batch_size)
(and optionally validation_dataset); --task takes a FILE.py or a dotted module name.
`hpc-train train --keys` lists every key, what it does and its default.
"""

from __future__ import annotations

import argparse



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE.yaml", help="a YAML file of key: value settings")
    parser.add_argument("--task", metavar="FILE.py|MODULE",
                        help="what to train: a task module (same as --set task=...); default: the built-in MNIST")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                        help="override one setting (repeatable), e.g. --set epochs=3")
    parser.add_argument("--data-dir", metavar="DIR", help="MNIST: IDX .gz files or mnist.npz (same as --set "
                        "data_dir=DIR); default: $HPC_TRAIN_DATA_DIR, else Keras' cache")
    parser.add_argument("--output-dir", metavar="DIR", help="where the chief writes (same as --set output_dir=DIR)")
    from hpc_train.cli.trackingoptions import add_tracking_arguments

    add_tracking_arguments(parser)
    parser.add_argument("--keys", action="store_true",
                        help="list the settings, each with what it does and its default, and exit")


def run(args: argparse.Namespace) -> int:
    import os

    from hpc_train.config import TrainConfig, data_dir_default, key_descriptions, load_config, to_dict

    if args.keys:  # as a config file would hold them: each key's meaning a comment above it
        import inspect

        from hpc_train import config as module

        described = key_descriptions(inspect.getsource(module))
        for key, value in to_dict(TrainConfig()).items():
            print(f"# {described.get(key) or key}\n{key}: {'null' if value is None else value}")
        return 0
    shortcuts = [f"{key}={value}" for key, value in (("task", args.task), ("data_dir", args.data_dir),
                                                     ("output_dir", args.output_dir)) if value is not None]
    from hpc_train.cli.trackingoptions import check_tracking, tracking_overrides

    config = load_config(args.config, [*shortcuts, *args.overrides, *tracking_overrides(args)],
                         data_dir=data_dir_default(os.environ))
    check_tracking(config, say_unreachable=False)
    from hpc_train.bootstrap.stderr_filter import filter_stderr

    filter_stderr()  # a Slurm task's rank log without TensorFlow's CPU-node start-up noise
    from hpc_train.bootstrap.tmpdir import made
    from hpc_train.training.trainer import run as train

    tracking = tracked_here(config, os.environ)
    with made(os.environ):  # the rank's own TMPDIR (TensorFlow's autograph files), gone when it ends
        code = train(config)
    if tracking is not None:
        tracking.finish(code, code)
    from hpc_train.training.outcome import leave_when_done

    return leave_when_done(code, os.environ)  # a job's rank: at once, its allocation not held for the teardown


def tracked_here(config, env):  # (TrainConfig, Mapping) -> JobTracking | None
    """`train --track mlflow` run by hand (not by a job, whose body tracks it): the chief's thread logs each
    epoch of its output folder; the other ranks, and a job's ranks, log nothing."""
    if config.track != "mlflow" or env.get("HPC_TRAIN_RUN_DIR") or env.get("SLURM_PROCID", "0") != "0":
        return None
    import sys
    from pathlib import Path

    from hpc_train.tracking.job import JobTracking

    output = Path(config.output_dir)
    tracking = JobTracking.for_job(output, config.tracking_uri, config.experiment or output.name, env,
                                   lambda line: print(line, file=sys.stderr, flush=True))
    tracking.start()
    return tracking
