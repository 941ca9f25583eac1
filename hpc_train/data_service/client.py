"""A rank's dataset through the job's data service: the one-line helper (`hpc_train.data_service.distribute`),
which the trainer's input (training/inputs.py) and a user's own command call alike."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from hpc_train.data_service.environment import ServiceEnv


def distribute(dataset: Any, env: Mapping[str, str] | None = None) -> Any:
    """`dataset` read through the job's data service (HPC_TRAIN_DATA_SERVICE and its job name and mode, which the
    job body sets in every rank), else `dataset` as it was: the same line runs with and without a service.

    Every rank of the job must pass the same dataset (the same graph, unsharded): the ranks share one job of the
    service, each element read by one rank. Batch before or after, as the dataset needs; the order of elements is
    the order the data workers finish them."""
    service = ServiceEnv.from_environ(os.environ if env is None else env)
    if service is None:
        return dataset
    import tensorflow as tf  # (the compute side's: only a rank with a dataset gets here)

    return dataset.apply(tf.data.experimental.service.distribute(
        processing_mode=service.mode, service=service.address, job_name=service.job_name))
