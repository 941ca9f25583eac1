"""Which task a training process is, decided before TensorFlow loads."""

from __future__ import annotations

import json

import pytest

from hpc_train.config import TrainConfig
from hpc_train.errors import HpcTrainError
from hpc_train.training.rank import SINGLE, RankInfo, closed_peers, lost_peers, parse_tf_config, prepare_rank
from tests.fake_slurm import step_env

MULTI = TrainConfig(strategy="multiworker")
PS = TrainConfig(strategy="parameter_server")


def test_single_process_strategies_need_no_cluster() -> None:
    assert prepare_rank(TrainConfig(), {}) is SINGLE
    assert SINGLE.is_chief


def test_single_process_strategies_refuse_a_step_of_many_tasks() -> None:
    with pytest.raises(HpcTrainError, match="strategy none runs one process but this Slurm step has 4 tasks"):
        prepare_rank(TrainConfig(), {"SLURM_STEP_NUM_TASKS": "4"})


def test_under_slurm_the_bootstrap_writes_tf_config() -> None:
    env = step_env("node[1-3]", "1(x3)", 0, extra={"SLURM_GPUS_ON_NODE": "1"})
    rank = prepare_rank(PS, env)
    assert (rank.type, rank.index, rank.is_chief) == ("chief", 0, True)
    assert json.loads(env["TF_CONFIG"])["cluster"]["ps"] == ["node2:17553"]
    assert env["CUDA_VISIBLE_DEVICES"] == ""  # the PS chief computes nothing


def test_a_given_tf_config_is_used_as_it_is() -> None:
    config = {"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}
    rank = prepare_rank(MULTI, {"TF_CONFIG": json.dumps(config), **step_env("x", "1", 0)})
    assert (rank.type, rank.index, rank.is_chief, rank.num_workers, rank.address) == ("worker", 1, False, 2, "b:2")


def test_distributed_strategies_without_a_cluster_say_how_to_get_one() -> None:
    with pytest.raises(HpcTrainError, match="strategy multiworker needs a cluster: run it under srun"):
        prepare_rank(MULTI, {})


@pytest.mark.parametrize("text", [
    "{", "[]", '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}',
    '{"cluster": {"worker": ["a:1"]}}',
])
def test_an_unusable_tf_config_is_refused(text: str) -> None:
    with pytest.raises(HpcTrainError, match="is not a TensorFlow cluster config with this task in it"):
        parse_tf_config(text, "multiworker")


def test_parameter_server_needs_all_three_roles() -> None:
    text = json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}})
    with pytest.raises(HpcTrainError, match="needs chief, ps and worker tasks; TF_CONFIG has worker"):
        parse_tf_config(text, "parameter_server")


def test_the_chief_is_chief_0_or_else_worker_0() -> None:
    with_chief = {"chief": ["c:1"], "worker": ["w:1"]}
    assert parse_tf_config(json.dumps({"cluster": with_chief, "task": {"type": "chief", "index": 0}}), "x").is_chief
    assert not parse_tf_config(json.dumps({"cluster": with_chief, "task": {"type": "worker", "index": 0}}),
                               "x").is_chief


PS_CLUSTER = {"chief": ["node1:20000"], "ps": ["node1:20001"], "worker": ["node2:20002", "node2:20003"]}


@pytest.mark.parametrize("rank, message, named", [
    # A lost parameter server, as the chief's coordinator reports it (after the failed step on worker 1).
    (RankInfo("chief", 0, PS_CLUSTER), "(0) UNAVAILABLE:  failed to connect to all addresses; last error: UNKNOWN: "
     "ipv4:node1:20001: Failed to connect to remote host: Connection refused [/job:worker/replica:0/task:1]",
     ["ps 0 at node1:20001"]),
    # A lost MultiWorkerMirrored peer, by device name only.
    (RankInfo("worker", 0, {"worker": ["node1:20000", "node2:20001"]}),
     "Collective ops is aborted by: recvmsg:Connection reset by peer ... /job:worker/replica:0/task:1 ...",
     ["worker 1 at node2:20001"]),
    # gRPC names localhost by number.
    (RankInfo("worker", 1, {"worker": ["localhost:20000", "localhost:20001"]}), "ipv4:127.0.0.1:20000: refused",
     ["worker 0 at localhost:20000"]),
    (RankInfo("worker", 0, {"worker": ["node1:20000"]}), "/job:worker/replica:0/task:0 and task:7", []),
])
def test_lost_peers_are_named_from_tensorflows_error(rank: RankInfo, message: str, named: list[str]) -> None:
    assert lost_peers(message, rank) == named


def test_a_peer_whose_port_is_closed_is_the_one_lost_and_a_listening_one_is_not() -> None:
    import socket

    with socket.socket() as listening, socket.socket() as closed:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        closed.bind(("127.0.0.1", 0))  # bound, never listening: a connection is refused, as a dead rank's is
        cluster = {"chief": ["127.0.0.1:1"], "ps": [f"127.0.0.1:{closed.getsockname()[1]}"],
                   "worker": [f"127.0.0.1:{listening.getsockname()[1]}", "no-such-host.invalid:20001"]}
        me = RankInfo("chief", 0, cluster)  # its own address (a closed port here) is never a lost peer
        assert closed_peers(me) == [f"ps 0 at {cluster['ps'][0]}"]
