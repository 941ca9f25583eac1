"""The trainer's training stream through the job's data service, when the job has one (injob/dataservice.py sets
HPC_TRAIN_DATA_SERVICE in every rank); the task module is not changed for it.

Every rank builds the same dataset, the task's whole stream (one input pipeline, not its share) after the batches
the job had read in all (each pipeline's count times the pipelines, shared out among the data workers, each of
which skips on its own share of the source), and reads it through the service under the
attempt's one job name: the data workers produce each batch once, and each batch goes to one rank, in the order the
workers finish them. The exact order of the batches, and so an exact resume, is what the job trades for it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping

from hpc_train.data_service.client import distribute
from hpc_train.data_service.environment import ServiceEnv, skip_per_worker
from hpc_train.training.keras import tf
from hpc_train.version import PREFIX

_SAID: set[str] = set()
Stream = Callable[["tf.distribute.InputContext", int], "tf.data.Dataset"]


def training_stream(stream: Stream, context: tf.distribute.InputContext, batches_done: int,
                    env: Mapping[str, str] | None = None) -> tf.data.Dataset:
    """`stream(context, batches_done)` (this pipeline's endless stream after what it read), or, with a data
    service, the whole stream read through it."""
    env = os.environ if env is None else env
    service = ServiceEnv.from_environ(env)
    if service is None:
        return stream(context, batches_done)
    if service.job_name not in _SAID:  # once a process: where its input comes from, in its log
        _SAID.add(service.job_name)
        print(f"{PREFIX}: training input through the data service at {service.address} (job {service.job_name}, "
              f"{service.mode}: example order not exact)", file=sys.stderr, flush=True)
    whole = tf.distribute.InputContext(1, 0, context.num_replicas_in_sync)
    # Each data worker runs the stream's skip on its own share of the source: the job's batches read, shared out.
    dataset = distribute(stream(whole, skip_per_worker(batches_done * context.num_input_pipelines, service.workers)),
                         env)
    # Said out loud, as the stream itself does: endless (the service's dataset is of unknown length).
    return dataset.apply(tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY))
