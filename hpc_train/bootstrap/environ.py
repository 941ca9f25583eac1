"""From a layout to the variables a rank exports, and the one side effect: applying them."""

from __future__ import annotations

import json
import os
from collections.abc import MutableMapping
from typing import Any

from hpc_train.bootstrap.layout import BootstrapOptions, Layout, compute_layout

RPC_LAYER = "grpc"


def tf_config(layout: Layout) -> dict[str, Any]:
    """This rank's TF_CONFIG, as TensorFlow's TFConfigClusterResolver reads it."""
    me = layout.me
    return {"cluster": layout.cluster(), "task": {"type": me.role, "index": me.index}, "rpc_layer": RPC_LAYER}


def rank_environment(layout: Layout) -> dict[str, str]:
    """The variables this rank exports: TF_CONFIG, and its GPUs unless Slurm bound them."""
    variables = {"TF_CONFIG": json.dumps(tf_config(layout), separators=(",", ":"))}
    devices = layout.me.devices
    if devices is not None:
        variables["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
    return variables


def apply_to_environ(environ: MutableMapping[str, str] | None = None,
                     options: BootstrapOptions = BootstrapOptions()) -> Layout:
    """Compute this rank's layout from `environ` (default `os.environ`) and export it there.

    Call it before TensorFlow is imported: TensorFlow reads CUDA_VISIBLE_DEVICES
    once, when it first looks for devices.
    """
    target: MutableMapping[str, str] = os.environ if environ is None else environ
    layout = compute_layout(target, options)
    target.update(rank_environment(layout))
    return layout


def describe_rank(layout: Layout, slurm_set: str | None = None) -> str:
    """One line for a job log: which rank this is, where it listens, which GPUs it sees. `slurm_set`: the
    CUDA_VISIBLE_DEVICES the rank found (Slurm's), for a rank whose GPUs the bootstrap leaves as they are."""
    me = layout.me
    return f"rank {me.rank} is {me.role} {me.index} at {me.address}, GPUs: {_seen(me.devices, slurm_set)}"


def _seen(devices: tuple[str, ...] | None, slurm_set: str | None) -> str:
    """The GPUs a rank sees, in words: its own, Slurm's where they are left as Slurm set them, `none` where it is
    bound to none (pure)."""
    if devices is not None:
        return ",".join(devices) or "none"
    if slurm_set is None:
        return "none bound (no CUDA_VISIBLE_DEVICES: any GPU of the node is visible)"
    return f"{slurm_set} (as Slurm set them)" if slurm_set.strip() else "none"


def format_table(layout: Layout) -> str:
    """The whole layout as an aligned table, this rank marked with '*'."""
    header = ("", "rank", "role", "index", "host", "port", "node", "local", "devices")
    rows = [header] + [
        ("*" if rank.rank == layout.rank else "", str(rank.rank), rank.role, str(rank.index), rank.host,
         str(rank.port), str(rank.node_index), str(rank.local_index), _devices_text(rank.devices))
        for rank in layout.ranks
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    return "\n".join([f"# {layout.strategy.value}, {len(layout.ranks)} tasks, ports: {layout.port_rule}"] + lines)


def _devices_text(devices: tuple[str, ...] | None) -> str:
    if devices is None:
        return "(as set)"
    return ",".join(devices) if devices else "none"

