"""Why hpc-train has its own bootstrap: TensorFlow's SlurmClusterResolver, side by side with ours.

These tests pin down the faults DEVELOPERS.md lists. If a TensorFlow release
fixes one, its test fails here: then re-check whether we still need to differ.
"""

from __future__ import annotations

import pytest

from hpc_train.bootstrap import compute_layout, tf_config
from tests.fake_slurm import step_env

pytestmark = pytest.mark.tensorflow


@pytest.fixture
def slurm_step(monkeypatch: pytest.MonkeyPatch, clean_environ: None, tmp_path):
    """Put a step's variables into os.environ (TF's resolver reads only os.environ)."""

    # TF's resolver writes CUDA_VISIBLE_DEVICES into os.environ; make sure it is undone.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")

    def put(env: dict[str, str]) -> None:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("PATH", str(tmp_path))  # a CPU-only node: no nvidia-smi anywhere

    return put


def tf_resolver():
    import tensorflow as tf

    return tf.distribute.cluster_resolver.SlurmClusterResolver


def test_cpu_only_node_tf_calls_nvidia_smi_and_crashes_ours_works(slurm_step) -> None:
    env = step_env("cpu[1-2]", "1(x2)", 0, hosts_by_rank=["cpu1", "cpu2"])
    slurm_step(env)
    with pytest.raises(FileNotFoundError, match="nvidia-smi"):
        tf_resolver()()
    with pytest.raises(ValueError, match="must not be zero"):
        tf_resolver()(gpus_per_node=0).cluster_spec()

    # Job 4242: window 16384 + (4242 mod 2048) * 8 = 17552.
    assert compute_layout(env).cluster() == {"worker": ["cpu1:17552", "cpu2:17553"]}


def test_node_9_and_10_tf_sorts_as_strings_ours_keeps_rank_order(slurm_step) -> None:
    env = step_env("node[9-10]", "1(x2)", 0, hosts_by_rank=["node9", "node10"])
    slurm_step(env)
    theirs = tf_resolver()(gpus_per_node=1, gpus_per_task=1, port_base=8888)
    # Slurm's rank 0 runs on node9, but TF tells rank 0 that it is node10.
    assert theirs.cluster_spec().as_dict() == {"worker": ["node10:8888", "node9:8888"]}
    assert theirs.task_id == 0

    ours = tf_config(compute_layout(env))
    assert ours["cluster"]["worker"] == ["node9:17552", "node10:17553"]
    assert ours["task"] == {"type": "worker", "index": 0}


def test_two_jobs_on_one_node_tf_reuses_port_8888_ours_do_not(slurm_step) -> None:
    tf_ports, our_ports = [], []
    for job_id in (100, 101):
        env = step_env("node1", "2", 0, job_id=job_id, hosts_by_rank=["node1", "node1"])
        slurm_step(env)
        tf_ports += tf_resolver()(gpus_per_node=2).cluster_spec().as_dict()["worker"]
        our_ports += [task.address for task in compute_layout(env).tasks]
    assert tf_ports == ["node1:8888", "node1:8889"] * 2
    assert len(set(our_ports)) == 4
