"""The ceiling of `hpc-train bench trainer`: the trainer's own training step, fed one constant batch.

The model `hpc-train train` builds, as it builds it (its task, compile,
precision policy, global batch and steps_per_execution; its process settings:
oneDNN on, malloc kept, the inter-op pool), trained by `model.fit` on one batch
of the trainer's own input repeated (`from_tensors(batch).repeat()`): no input
pipeline, no callbacks but an epoch timer, no validation, no checkpoints, no
metrics.json. What it reaches is what TensorFlow's kernels allow this model on
this machine; the trainer's images/s over it is the trainer's share. It prints
each epoch's training images/s as JSON on its last line:

    python -m hpc_train.bench.ceiling DATA_DIR EPOCHS [KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from hpc_train.config import TrainConfig, load_config


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir")
    parser.add_argument("epochs", type=int)
    parser.add_argument("settings", nargs="*", metavar="KEY=VALUE", help="as hpc-train train --set takes them")
    args = parser.parse_args(argv)
    from hpc_train.training.memory import keep_freed_memory
    from hpc_train.training.threads import size_inter_op_pool

    config = load_config(None, [f"data_dir={args.data_dir}", f"epochs={args.epochs}", *args.settings])
    if config.tune_malloc:  # as the trainer does, before TensorFlow allocates or starts its pools
        keep_freed_memory()
    size_inter_op_pool(config.inter_op_threads, config.strategy)
    seconds, images = timed_epochs(config)
    print(json.dumps({"images_per_second": [images / value for value in seconds], "seconds": seconds}))
    return 0


def timed_epochs(config: TrainConfig) -> tuple[list[float], int]:
    """Each epoch's seconds of the trainer's model on one constant batch, and the images an epoch trains."""
    from hpc_train.bench.epoch_timer import fit_timed
    from hpc_train.training import inputs
    from hpc_train.training.keras import keras, tf
    from hpc_train.training.precision import job_precision
    from hpc_train.training.strategy import make_strategy
    from hpc_train.training.trainer import compiled_model
    from hpc_train.training.usertask import load_task

    task = load_task(config.task)
    strategy = make_strategy(config)
    replicas = strategy.num_replicas_in_sync
    steps = inputs.epoch_steps(task, config, inputs.Pipelines(1, replicas))  # the trainer's epoch
    model = compiled_model(config, strategy, task, steps, job_precision(config.precision, strategy).policy)
    batch = inputs.training_fn(task, config, 0)(None).take(1).get_single_element()  # the trainer's first batch
    constant = tf.data.Dataset.from_tensors(batch).repeat()
    seconds = fit_timed(model, inputs.for_fit(lambda context=None: constant, config.strategy), keras,
                        config.epochs, steps, verbose=0)
    return seconds, steps * config.batch_size * replicas


if __name__ == "__main__":
    sys.exit(main())
