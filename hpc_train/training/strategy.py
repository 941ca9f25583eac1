"""One tf.distribute strategy per config value, for the task this process is."""

from __future__ import annotations

import os

from hpc_train.bootstrap.devices import cpu_fallback_note
from hpc_train.config import TrainConfig
from hpc_train.training.keras import tf

COLLECTIVES = {
    "auto": tf.distribute.experimental.CommunicationImplementation.AUTO,
    "ring": tf.distribute.experimental.CommunicationImplementation.RING,
    "nccl": tf.distribute.experimental.CommunicationImplementation.NCCL,
}


def make_strategy(config: TrainConfig) -> tf.distribute.Strategy:
    """The strategy of the chief or a worker; ps (and PS workers) run servers instead (see servers.py)."""
    if config.strategy == "none":
        return tf.distribute.get_strategy()  # the default strategy: one device, as a plain Keras script
    if config.strategy == "mirrored":
        return tf.distribute.MirroredStrategy()
    if config.strategy == "multiworker":
        options = tf.distribute.experimental.CommunicationOptions(implementation=COLLECTIVES[config.collective])
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    return tf.distribute.ParameterServerStrategy(resolver)


def gpus_unused_note() -> str | None:
    """The line a task says once when Slurm gave it GPUs that this TensorFlow cannot use (a CPU build or no
    driver), so that it computes on the CPU: said rather than left to the C++ start-up noise (bootstrap/stderr_filter.py)."""
    return cpu_fallback_note(os.environ.get("CUDA_VISIBLE_DEVICES"), len(tf.config.list_physical_devices("GPU")))
