"""One tf.distribute strategy per config value, for the task this process is."""

from __future__ import annotations

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

