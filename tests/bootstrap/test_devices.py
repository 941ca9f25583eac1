from __future__ import annotations

import pytest

from hpc_train.bootstrap.devices import NodeGpus, assign_devices
from hpc_train.errors import HpcTrainError, SlurmEnvError


@pytest.mark.parametrize("env, visible, total, narrowed", [
    ({}, (), 0, False),
    ({"SLURM_GPUS_ON_NODE": "4"}, ("0", "1", "2", "3"), 4, False),
    ({"SLURM_JOB_GPUS": "2,3"}, ("2", "3"), 2, False),
    ({"SLURM_STEP_GPUS": "6,7", "CUDA_VISIBLE_DEVICES": "0,1"}, ("0", "1"), 2, False),
    ({"SLURM_GPUS_ON_NODE": "4", "CUDA_VISIBLE_DEVICES": "3"}, ("3",), 4, True),
    ({"SLURM_GPUS_ON_NODE": "1", "CUDA_VISIBLE_DEVICES": "NoDevFiles"}, (), 1, True),
    ({"CUDA_VISIBLE_DEVICES": "0,1"}, ("0", "1"), 2, False),
])
def test_node_gpus_come_from_slurm_variables(env, visible, total, narrowed) -> None:
    gpus = NodeGpus.from_environment(env)
    assert (gpus.visible, gpus.total, gpus.narrowed, gpus.known) == (visible, total, narrowed, bool(env))


def test_a_bad_gpu_count_names_the_variable() -> None:
    with pytest.raises(SlurmEnvError, match="SLURM_GPUS_ON_NODE='-2'"):
        NodeGpus.from_environment({"SLURM_GPUS_ON_NODE": "-2"})


def test_cpu_only_nodes_never_run_nvidia_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    def forbidden(*args, **kwargs):
        raise AssertionError("a subprocess was started")

    monkeypatch.setattr(subprocess, "Popen", forbidden)
    devices, _ = assign_devices(["c1"], [0, 0], [True, True], NodeGpus.from_environment({}))
    assert devices == (None, None)


def test_non_computing_tasks_are_masked_even_when_slurm_bound_gpus() -> None:
    gpus = NodeGpus.from_environment({"SLURM_GPUS_ON_NODE": "2", "CUDA_VISIBLE_DEVICES": "1"})
    devices, _ = assign_devices(["g1"], [0, 0], [False, True], gpus)
    assert devices == ((), None)


def test_more_gpu_tasks_than_gpus_is_refused() -> None:
    with pytest.raises(HpcTrainError, match="g2 runs 3 GPU tasks but has 2 GPUs"):
        assign_devices(["g1", "g2"], [0, 1, 1, 1], [True] * 4,
                       NodeGpus.from_environment({"SLURM_GPUS_ON_NODE": "2"}))


def test_a_task_bound_to_gpus_tensorflow_cannot_use_says_it_trains_on_the_cpu() -> None:
    from hpc_train.bootstrap.devices import cpu_fallback_note

    assert cpu_fallback_note("1", 0) == "bound to GPU 1 by Slurm; TensorFlow sees no GPU: CPU"
    assert cpu_fallback_note("0,1", 0) == "bound to GPUs 0,1 by Slurm; TensorFlow sees no GPU: CPU"
    assert cpu_fallback_note("0", None) == ("bound to GPU 0 by Slurm; no GPU driver here "
                                            "(/proc/driver/nvidia/version): CPU")
    for unbound in (None, "", "-1", "NoDevFiles"):
        assert cpu_fallback_note(unbound, 0) is None
    assert cpu_fallback_note("0", 1) is None  # TensorFlow uses it
