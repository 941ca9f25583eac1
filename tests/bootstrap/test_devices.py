from __future__ import annotations

import pytest

from hpc_train.bootstrap.devices import (ListedGpu, NodeGpus, assign_devices, parse_gpu_list, unknown_gpu_note,
                                         usable_gpus)
from hpc_train.errors import HpcTrainError, SlurmEnvError
from tests.fake_nvidia import gpu_lines, uuid


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


# What this machine has, from nvidia-smi -L (pure: its output in, ids out).

def test_the_gpu_list_is_read_from_nvidia_smi_lines() -> None:
    text = (gpu_lines(2) + "  MIG 1g.18gb     Device  0: (UUID: MIG-1b2c3d4e-0000-0000-0000-000000000000)\n"
            "No devices found.\n")
    assert parse_gpu_list(text) == (ListedGpu(0, uuid(0)), ListedGpu(1, uuid(1), ("MIG-1b2c3d4e-0000-0000-0000-"
                                                                                   "000000000000",)))
    assert parse_gpu_list("GPU 0: NVIDIA H200 (UUID: GPU-322a5082-f813-4312-b977-d11a60647341)") == (
        ListedGpu(0, "GPU-322a5082-f813-4312-b977-d11a60647341"),)  # the real line, from an H200
    assert parse_gpu_list("") == ()


MIG_LIST = ("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)\n"
            "  MIG 3g.20gb     Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)\n"
            "  MIG 3g.20gb     Device  1: (UUID: MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb)\n"
            "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-00c1e4a1-0000-0000-0000-000000000001)\n")


def test_mig_devices_under_a_gpu_are_read_and_bind_as_cuda_numbers_them() -> None:
    """(issue 46, 5) MIG devices in nvidia-smi -L were skipped: a rank bound to one was named a GPU the node lacks."""
    listed = parse_gpu_list(MIG_LIST)
    assert [gpu.migs for gpu in listed] == [("MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f",
                                             "MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb"), ()]
    assert usable_gpus(listed, None) == ("0", "1", "2")  # two MIG devices in GPU 0's place, then GPU 1
    assert usable_gpus(listed, "MIG-cba663e8,2") == ("MIG-cba663e8", "2")
    for fine in ("2", "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f", "MIG-cba6"):
        assert unknown_gpu_note(0, fine, listed) is None, fine
    assert "bound to GPU MIG-ffff" in unknown_gpu_note(0, "MIG-ffff", listed)
    assert "bound to GPU 3 " in unknown_gpu_note(0, "3", listed)


@pytest.mark.parametrize("shell, usable", [
    (None, ("0", "1", "2")),  # no CUDA_VISIBLE_DEVICES: every listed GPU
    ("2,0", ("2", "0")),  # narrowed, in the shell's order
    (f"{uuid(1)},0", (uuid(1), "0")),  # UUIDs kept as written
    ("GPU-322a5082-f813-4312-b977-d11a60647343", ("GPU-322a5082-f813-4312-b977-d11a60647343",)),
    ("GPU-322a5082", ()),  # a prefix of three UUIDs names none (CUDA refuses an ambiguous one)
    ("0,7,1", ("0",)),  # CUDA stops at the first id that names no GPU
    ("", ()), ("-1", ()), ("NoDevFiles", ()), ("1,1", ("1",)),
])
def test_the_shells_cuda_visible_devices_narrows_the_list(shell: str | None, usable: tuple[str, ...]) -> None:
    assert usable_gpus(parse_gpu_list(gpu_lines(3)), shell) == usable


def test_a_rank_bound_to_a_gpu_the_node_lacks_is_named_with_what_the_node_has() -> None:
    two = parse_gpu_list(gpu_lines(2))
    assert unknown_gpu_note(3, "1,2", two) == (
        f"rank 3 is bound to GPU 2 (CUDA_VISIBLE_DEVICES=1,2) but this node has 2 GPUs: 0 {uuid(0)}, 1 {uuid(1)} "
        "(nvidia-smi -L); CUDA skips it and every GPU named after it")
    stranger = "GPU-00000000-0000-0000-0000-000000000000"
    assert unknown_gpu_note(0, stranger, two).startswith(f"rank 0 is bound to GPU {stranger} (")
    assert "but this node has no GPU (nvidia-smi -L)" in unknown_gpu_note(1, "0", ())
    for fine in ("0", "1,0", uuid(1), "", None, "-1"):
        assert unknown_gpu_note(0, fine, two) is None
