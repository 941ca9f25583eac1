"""A TensorFlow ClusterResolver built from a layout, so a strategy needs no TF_CONFIG.

    resolver = LayoutClusterResolver.from_environment()
    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)

This module imports TensorFlow; the rest of the bootstrap does not. Unlike
TensorFlow's SlurmClusterResolver, nothing here rewrites CUDA_VISIBLE_DEVICES:
reading the cluster has no side effect (use `apply_to_environ` for that).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import tensorflow as tf
from tensorflow.python.distribute.cluster_resolver.cluster_resolver import format_master_url

from hpc_train.bootstrap.environ import RPC_LAYER
from hpc_train.bootstrap.layout import BootstrapOptions, Layout, compute_layout


class LayoutClusterResolver(tf.distribute.cluster_resolver.ClusterResolver):
    """Cluster spec, task type and id, and GPU count of one task, from its `Layout`."""

    def __init__(self, layout: Layout, rpc_layer: str = RPC_LAYER) -> None:
        self._layout = layout
        self.task_type: str = layout.me.role
        self.task_id: int = layout.me.index
        self.rpc_layer: str | None = rpc_layer

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None,
                         options: BootstrapOptions = BootstrapOptions()) -> "LayoutClusterResolver":
        return cls(compute_layout(os.environ if env is None else env, options))

    @property
    def layout(self) -> Layout:
        return self._layout

    def cluster_spec(self) -> tf.train.ClusterSpec:
        return tf.train.ClusterSpec(self._layout.cluster())

    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        task_type = self.task_type if task_type is None else task_type
        task_id = self.task_id if task_id is None else task_id
        address = self.cluster_spec().task_address(task_type, task_id)
        return format_master_url(address, self.rpc_layer if rpc_layer is None else rpc_layer)

    def num_accelerators(self, task_type: str | None = None, task_id: int | None = None,
                         config_proto: object = None) -> dict[str, int]:
        devices = self._layout.me.devices
        if devices is None:  # Slurm bound the GPUs itself, or none are described: ask TF
            return super().num_accelerators(task_type, task_id, config_proto)
        return {"GPU": len(devices)} if devices else {}
