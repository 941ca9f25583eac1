"""The trainer's training stream through the job's data service, when the job has one (injob/dataservice.py sets
HPC_TRAIN_DATA_SERVICE in every rank); the task module is not changed for it.

Every rank builds the same dataset, the task's whole stream (one input pipeline, not its share) after the batches
the job had read in all (each pipeline's count times the pipelines), and reads it through the service under the
attempt's one job name: the data workers produce each batch once, and each batch goes to one rank, in the order the
workers finish them. The exact order of the batches, and so an exact resume, is what the job trades for it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from hpc_train.data_service.client import distribute
from hpc_train.data_service.environment import ServiceEnv
from hpc_train.training.keras import tf

Stream = Callable[["tf.distribute.InputContext", int], "tf.data.Dataset"]


def served(env: Mapping[str, str] | None = None) -> bool:
    """Whether this rank's job has a data service."""
    return ServiceEnv.from_environ(os.environ if env is None else env) is not None


def training_stream(stream: Stream, context: tf.distribute.InputContext, batches_done: int,
                    env: Mapping[str, str] | None = None) -> tf.data.Dataset:
    """`stream(context, batches_done)` (this pipeline's endless stream after what it read), or, with a data
    service, the whole stream read through it."""
    env = os.environ if env is None else env
    if not served(env):
        return stream(context, batches_done)
    whole = tf.distribute.InputContext(1, 0, context.num_replicas_in_sync)
    dataset = distribute(stream(whole, batches_done * context.num_input_pipelines), env)
    # Said out loud, as the stream itself does: endless (the service's dataset is of unknown length).
    return dataset.apply(tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY))
