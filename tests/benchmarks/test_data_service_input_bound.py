"""benchmarks/data_service_input_bound.py's pure parts (the arms' order, the figures read from a run folder, the
pairing by round, the table, the seconds a killed worker cost, which core a process goes to) and its task module
(benchmarks/input_bound_task.py: the same batches on every call, of the shape and type the model takes)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from tests.mnist_data import shared_mnist

ROOT = Path(__file__).resolve().parents[2]


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # (dataclasses look their module up there)
    spec.loader.exec_module(module)
    return module


bench = load("data_service_input_bound")


def run(arm: str, number: int, speed: float, accuracy: float = 0.95, share: float = 0.5) -> object:
    return bench.Run(arm, number, speed, accuracy, share, job=str(number), state="COMPLETED")


def test_the_arms_alternate_from_round_to_round() -> None:
    assert [bench.round_order(number) for number in (1, 2, 3)] == [("alone", "served"), ("served", "alone"),
                                                                   ("alone", "served")]


def test_throughput_leaves_the_first_epoch_out_and_weighs_epochs_by_their_images() -> None:
    epochs = [{"epoch": 1, "images": 1000, "training_seconds": 100.0},  # tracing: left out
              {"epoch": 2, "images": 1000, "training_seconds": 2.0},
              {"epoch": 3, "images": 3000, "training_seconds": 2.0}]
    assert bench.warm_throughput(epochs) == 1000.0
    assert bench.warm_throughput(epochs[:1]) == 10.0  # one epoch: its own


def test_the_input_share_is_input_over_the_steps_time_and_zero_before_any() -> None:
    assert bench.input_share({"total": {"input": 30.0, "compute": 10.0, "startup": 99.0}}) == 0.75
    assert bench.input_share({"total": {}}) == 0.0


def test_ratios_pair_each_rounds_own_runs_whatever_order_they_ran_in() -> None:
    runs = [run("alone", 1, 100.0), run("served", 1, 180.0), run("served", 2, 150.0), run("alone", 2, 120.0),
            run("alone", 3, 90.0)]  # round 3 lacks its served run: no ratio
    assert bench.paired_ratios(runs) == [(1, 1.8), (2, 1.25)]


def test_the_table_has_a_row_per_round_its_ratio_and_the_medians() -> None:
    runs = [run("alone", 1, 100.0, 0.951, 0.6), run("served", 1, 180.0, 0.949, 0.04),
            run("served", 2, 156.0, 0.961, 0.1), run("alone", 2, 120.0, 0.955, 0.5)]
    lines = bench.table(runs).splitlines()
    assert lines[0].startswith("| round | alone: images/s | served: images/s | ratio |")
    assert lines[2] == "| 1 | 100 | 180 | 1.80x | 95.10% | 94.90% | 60% | 4% |"
    assert lines[3] == "| 2 | 120 | 156 | 1.30x | 95.50% | 96.10% | 50% | 10% |"
    assert lines[4] == "| median | 110 | 168 | 1.55x | 95.30% | 95.50% | 55% | 7% |"


def test_a_round_without_one_arm_shows_a_dash_and_no_ratio() -> None:
    assert bench.table([run("alone", 1, 100.0)]).splitlines()[2] == "| 1 | 100 | - | - | 95.00% | - | 50% | - |"


def test_the_seconds_lost_are_the_killed_epochs_beyond_the_median_of_the_other_warm_ones() -> None:
    epochs = [{"epoch": 1, "training_seconds": 50.0}, {"epoch": 2, "training_seconds": 10.0},
              {"epoch": 3, "training_seconds": 22.5}, {"epoch": 4, "training_seconds": 11.0}]
    assert bench.lost_seconds(epochs, 3) == 12.0
    with pytest.raises(ValueError, match="epoch 5 and another warm epoch"):
        bench.lost_seconds(epochs, 5)


def test_the_rank_gets_its_own_core_and_everything_else_of_the_job_the_other() -> None:
    rank = b"/v/bin/python\0-u\0-m\0hpc_train\0train\0--config\0runs/x/config.yaml\0"
    worker = b"/v/bin/python\0-m\0hpc_train.data_service.servers\0worker\0--dispatcher\0grpc://dsb1:1\0"
    body = b"/v/bin/python\0-m\0hpc_train\0job\0--name\0x\0"
    roles = [bench.role_of(cmdline) for cmdline in (rank, worker, body, b"srun\0--overlap\0")]
    assert roles == ["rank", "service", "job", "job"]
    assert [bench.core_for(role) for role in roles] == [bench.RANK_CORE] + [bench.SERVICE_CORE] * 3
    assert bench.RANK_CORE != bench.SERVICE_CORE


def test_the_pinner_pins_and_renices_every_thread_of_the_jobs_rank_and_leaves_other_processes_alone() -> None:
    # A process with a second thread (started before it says so), named as a rank is, of job 4242 of this cluster;
    # the other of the same job id on another cluster.
    rank_like = [sys.executable, "-c", "import sys, threading; threading.Thread(target=sys.stdin.read).start(); "
                 "print('ready', flush=True); sys.stdin.read()", "hpc_train", "train"]
    env = {"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "4242", "SLURM_CONF": "/tmp/x/slurm.conf"}
    ours = subprocess.Popen(rank_like, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    other = subprocess.Popen(rank_like, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             env={**env, "SLURM_CONF": "/tmp/other/slurm.conf"})
    try:
        assert ours.stdout.readline() == other.stdout.readline() == b"ready\n"
        pinner = bench.Pinner("4242", "/tmp/x/slurm.conf", nice=3)
        pinner.scan()
        threads = [int(task.name) for task in os.scandir(f"/proc/{ours.pid}/task")]
        assert pinner.roles[ours.pid] == "rank" and other.pid not in pinner.roles
        assert all(os.sched_getaffinity(thread) == {bench.RANK_CORE} for thread in threads)
        assert all(os.getpriority(os.PRIO_PROCESS, thread) == 3 for thread in threads)
        assert os.sched_getaffinity(other.pid) == os.sched_getaffinity(0)  # as it started
        assert os.getpriority(os.PRIO_PROCESS, other.pid) != 3
        assert pinner.cpu_seconds("rank") >= 0 and pinner.cpu_seconds("service") == 0
    finally:
        for process in (ours, other):
            process.kill()
            process.wait()


@pytest.mark.tensorflow
def test_the_task_gives_the_same_augmented_batches_on_every_call() -> None:
    import numpy as np
    import tensorflow as tf

    task = load("input_bound_task")
    config = SimpleNamespace(data_dir=str(shared_mnist()))
    context = tf.distribute.InputContext(2, 1, 1)

    def first_batches() -> list:
        return [(images.numpy(), labels.numpy()) for images, labels in task.train_dataset(context, 8, config).take(2)]

    one, two = first_batches(), first_batches()
    assert all((a == c).all() and (b == d).all() for (a, b), (c, d) in zip(one, two))
    images, labels = one[0]
    assert images.shape == (8, task.CROP, task.CROP, 1) and images.dtype == "uint8" and labels.shape == (8,)
    # Augmented: not the plain upscaled centre crop of the same image.
    index = int(np.random.default_rng(task.SEED).permutation(8000)[1])  # pipeline 1 of 2's first
    plain = task.centre(task._splits(config).train_images[index][..., None]).numpy()
    assert (plain != images[0]).mean() > 0.5
    model = task.build_model()
    assert model.output_shape == (None, 10)
