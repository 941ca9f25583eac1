"""Which rank this process is, decided before TensorFlow is imported.

Distributed strategies read TF_CONFIG. When it is not set, the bootstrap builds
it (and this rank's GPU binding) from the Slurm step, so that
`srun hpc-train train ...` needs no wrapper. Single-process strategies refuse a
step of several ranks instead of training N copies into one output directory.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import MutableMapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from hpc_train.bootstrap import BootstrapOptions
from hpc_train.bootstrap.startup import start_rank
from hpc_train.config import TrainConfig
from hpc_train.errors import HpcTrainError
from hpc_train.utilization.sampler import join_node

DISTRIBUTED = ("multiworker", "parameter_server")


@dataclass(frozen=True)
class RankInfo:
    """This process's place: its role and index, the cluster, and whether it is the chief."""

    type: str
    index: int
    cluster: dict[str, list[str]]

    @property
    def is_chief(self) -> bool:
        """The chief writes checkpoints, logs and metrics: `chief` 0, else `worker` 0."""
        if "chief" in self.cluster:
            return self.type == "chief"
        return self.type == "worker" and self.index == 0

    @property
    def num_workers(self) -> int:
        return len(self.cluster.get("worker", []))

    @property
    def address(self) -> str:
        return self.cluster[self.type][self.index]


SINGLE = RankInfo("worker", 0, {})

# How TensorFlow's errors name a rank: by device ("/job:ps/replica:0/task:0") or by gRPC address.
_DEVICE = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")
_ADDRESS = re.compile(r"(?:ipv[46]:)?([\w.-]+:\d+)")


def lost_peers(message: str, rank: RankInfo) -> list[str]:
    """The ranks (other than this one) that a TensorFlow error message names, as "ps 0 at node2:20001".

    An address that could not be reached is the surest sign; device names
    ("/job:worker/replica:0/task:1") may only say where the failed step ran.
    """
    by_address: dict[str, tuple[str, int]] = {}
    for role, addresses in rank.cluster.items():
        for index, address in enumerate(addresses):
            by_address[address] = (role, index)
            by_address.setdefault(_numeric(address), (role, index))  # gRPC names hosts by number
    named = [by_address[address] for address in _ADDRESS.findall(message) if address in by_address]
    if not named:
        named = [(role, int(index)) for role, index in _DEVICE.findall(message)]
    peers = [peer for peer in dict.fromkeys(named) if peer != (rank.type, rank.index)
             and peer[1] < len(rank.cluster.get(peer[0], ()))]
    return [f"{role} {index} at {rank.cluster[role][index]}" for role, index in peers]


def closed_peers(rank: RankInfo, timeout: float = 2.0) -> list[str]:
    """The other ranks whose server no longer takes a connection, as "ps 0 at node2:20001": a rank that died has
    its port closed (refused), a node that is gone does not answer (`timeout`). TensorFlow's error names the peer it
    lost only sometimes: a parameter server's death may reach the chief as a worker's failed step. A frozen rank's
    port still takes connections (the kernel answers for it): its peers are found in the error message instead."""
    others = [(role, index, address) for role, addresses in rank.cluster.items()
              for index, address in enumerate(addresses) if (role, index) != (rank.type, rank.index)]
    if not others:
        return []
    with ThreadPoolExecutor(max_workers=min(32, len(others))) as pool:
        closed = list(pool.map(lambda peer: _refuses(peer[2], timeout), others))
    return [f"{role} {index} at {address}" for (role, index, address), gone in zip(others, closed) if gone]


def _refuses(address: str, timeout: float) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return False
    except (ConnectionRefusedError, TimeoutError, socket.timeout):
        return True
    except (OSError, ValueError):  # a name that does not resolve, a network error: no sign either way
        return False


def _numeric(address: str) -> str:
    host, _, port = address.rpartition(":")
    try:
        return f"{socket.gethostbyname(host)}:{port}"
    except OSError:
        return address

def prepare_rank(config: TrainConfig, environ: MutableMapping[str, str] | None = None) -> RankInfo:
    """Find (or, under Slurm, build) this rank's TF_CONFIG; return its place. The rank then joins its node's
    utilization sampler (utilization/sampler.py), its GPUs bound."""
    env: MutableMapping[str, str] = os.environ if environ is None else environ
    slurms = env.get("CUDA_VISIBLE_DEVICES")  # the node's GPUs, before this rank's share is cut
    rank = _place(config, env)
    join_node(env, os.getpid(), slurms=slurms)
    return rank


def _place(config: TrainConfig, env: MutableMapping[str, str]) -> RankInfo:
    if config.strategy not in DISTRIBUTED:
        _refuse_many_ranks(config, env)
        return SINGLE
    if "TF_CONFIG" not in env:
        if not any(name in env for name in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST")):
            raise HpcTrainError(f"strategy {config.strategy} needs a cluster: run it under srun (hpc-train builds "
                                "TF_CONFIG from the Slurm step), or set TF_CONFIG")
        _, variables = start_rank(BootstrapOptions(strategy=config.strategy, num_ps=config.num_ps), env)
        env.update(variables)  # before TensorFlow starts: it reads CUDA_VISIBLE_DEVICES once
    return parse_tf_config(env["TF_CONFIG"], config.strategy)


def parse_tf_config(text: str, strategy: str) -> RankInfo:
    unusable = HpcTrainError(f"TF_CONFIG={text!r} is not a TensorFlow cluster config with this task in it; "
                             "unset it to let hpc-train build it from the Slurm step")
    try:
        value = json.loads(text)
        rank = RankInfo(str(value["task"]["type"]), int(value["task"]["index"]),
                        {str(role): list(addresses) for role, addresses in value["cluster"].items()})
    except (ValueError, KeyError, TypeError, AttributeError):
        raise unusable from None
    if not 0 <= rank.index < len(rank.cluster.get(rank.type, ())):
        raise unusable
    if strategy == "parameter_server" and not {"chief", "ps", "worker"} <= set(rank.cluster):
        raise HpcTrainError(f"strategy parameter_server needs chief, ps and worker tasks; TF_CONFIG has "
                            f"{', '.join(sorted(rank.cluster))}")
    return rank


def _refuse_many_ranks(config: TrainConfig, env: MutableMapping[str, str]) -> None:
    tasks = env.get("SLURM_STEP_NUM_TASKS", "1")
    if tasks.isdigit() and int(tasks) > 1:
        raise HpcTrainError(f"strategy {config.strategy} runs one process but this Slurm step has {tasks} tasks; "
                            "use --set strategy=multiworker, or start one task (srun -n 1)")
