"""The node's sampler, through its thread, with a stand-in NVML at the binding's seam (tests/fake_nvml.py): what
it keeps, an idle GPU named by the job body's watch and by status within a minute of the threshold, nothing
flagged while every GPU is busy, and no GPU rows (never an error) without NVML."""

from __future__ import annotations

import os
import queue
import re
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hpc_train.utilization import files
from hpc_train.utilization.nvml import open_nvml
from hpc_train.utilization.sampler import bound_gpus, cpu_percent, gpu_ranks, join_node
from hpc_train.utilization.settings import Sampling
from hpc_train.utilization.summary import status_lines
from hpc_train.utilization.watch import IdleWatch
from tests.fake_nvml import FakeNvml

INTERVAL = 0.2  # seconds between samples, for the test
IDLE_SECONDS = 1.0  # the idle threshold, for the test
WAIT = 60.0  # the most any event here may take


def wait_for(what: Callable[[], object], timeout: float = WAIT) -> object:
    """What `what` returns once it is truthy; fails after `timeout` (the events come every INTERVAL)."""
    deadline = time.monotonic() + timeout
    while not (found := what()):
        assert time.monotonic() < deadline, "the event never came"
        time.sleep(0.05)
    return found


def rank_environ(run_dir: Path, rank: int, local: int, gpus: str | None) -> dict[str, str]:
    """A rank's environment once the bootstrap bound it to `gpus`."""
    env = {"HPC_TRAIN_RUN_DIR": str(run_dir), "SLURMD_NODENAME": "node2", "SLURM_PROCID": str(rank),
           "SLURM_LOCALID": str(local), "SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0",
           "HPC_TRAIN_SAMPLE_SECONDS": str(INTERVAL), "HPC_TRAIN_IDLE_MINUTES": str(IDLE_SECONDS / 60)}
    return env if gpus is None else {**env, "CUDA_VISIBLE_DEVICES": gpus}


@pytest.fixture
def other_rank() -> Iterator[subprocess.Popen]:
    """A second rank of the node: a process that waits."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    yield child
    child.communicate(b"")


def rows_of(run_dir: Path) -> list[dict]:
    return files.read_rows(run_dir)


def start_node(run_dir: Path, fake: FakeNvml | None, other: subprocess.Popen):
    """Rank 1 (GPU 2) registers; rank 0 (GPUs 0 and 1, this process) registers and starts the node's sampler. Slurm
    gave the step GPUs 0 to 3: GPU 3 is the job's, no rank's."""
    nvml = (lambda: open_nvml(fake)) if fake is not None else (lambda: None)
    assert join_node(rank_environ(run_dir, 1, 1, "2"), other.pid, nvml, "0,1,2,3") is None  # not the first rank
    sampler = join_node(rank_environ(run_dir, 0, 0, "0,1"), os.getpid(), nvml, "0,1,2,3")
    assert sampler is not None
    return sampler


def test_an_idle_gpu_is_named_with_its_ranks_within_a_minute_and_cleared_once_busy(
        tmp_path: Path, other_rank: subprocess.Popen) -> None:
    fake = FakeNvml({0: 95.0, 1: 0.0, 2: 88.0, 3: 60.0, 4: 0.0})  # GPU 4: not the job's, never named
    said: queue.Queue[str] = queue.Queue()
    sampler = start_node(tmp_path, fake, other_rank)
    watch = IdleWatch(tmp_path, Sampling(INTERVAL, 5.0, IDLE_SECONDS), say=said.put).start()
    try:
        line = said.get(timeout=IDLE_SECONDS + WAIT)
        named = re.fullmatch(r"hpc-train: node2 GPU 1 \(rank 0\) idle for (\d+) s: under 5% since \d\d:\d\d:\d\d",
                             line)
        assert named and IDLE_SECONDS <= int(named.group(1)) <= IDLE_SECONDS + 60, line
        shown = status_lines(tmp_path)
        assert re.fullmatch(r"GPUs: 3 of 4 busy over 50%; node2 GPU 1 idle for \d+ s", shown[0]), shown
        assert shown[1].startswith("  idle: node2 GPU 1 (rank 0) idle for") and len(shown) == 2, shown
        fake.utilizations[1] = 70.0
        assert re.fullmatch(r"hpc-train: node2 GPU 1 \(rank 0\) busy again \(70%\) after \d+ s idle",
                            said.get(timeout=WAIT))
        assert said.empty()  # one line each: named once, cleared once
        wait_for(lambda: len(status_lines(tmp_path)) == 1)
    finally:
        sampler.stop()
        watch.stop()
    last = rows_of(tmp_path)[-1]
    assert [(gpu["gpu"], gpu["ranks"]) for gpu in last["gpus"]] == [("0", [0]), ("1", [0]), ("2", [1]), ("3", [])]
    assert [rank["rank"] for rank in last["ranks"]] == [0, 1]
    assert all(rank["cores"] >= 1 and rank["rss"] > 0 and rank["cpu"] is not None for rank in last["ranks"])
    for folder in (files.folder(tmp_path), files.folder(tmp_path) / "ranks", files.folder(tmp_path) / "ranks/node2"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    for kept in (files.node_file(tmp_path, "node2"), files.folder(tmp_path) / "ranks/node2/1.json"):
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600, kept


def test_nothing_is_flagged_while_every_gpu_is_busy(tmp_path: Path, other_rank: subprocess.Popen) -> None:
    said: list[str] = []
    sampler = start_node(tmp_path, FakeNvml({0: 95.0, 1: 60.0, 2: 88.0, 3: 51.0}), other_rank)
    watch = IdleWatch(tmp_path, Sampling(INTERVAL, 5.0, IDLE_SECONDS), say=said.append)
    try:
        # Long past the threshold: three times as many samples as it takes.
        wait_for(lambda: len(rows_of(tmp_path)) >= 3 * IDLE_SECONDS / INTERVAL)
    finally:
        sampler.stop()
    assert watch.look() == [] and said == []
    assert status_lines(tmp_path) == ["GPUs: 4 of 4 busy over 50%"]


def test_without_nvml_the_ranks_are_sampled_and_no_gpu_is_and_status_says_nothing_of_gpus(
        tmp_path: Path, other_rank: subprocess.Popen) -> None:
    sampler = start_node(tmp_path, None, other_rank)
    try:
        rows = wait_for(lambda: [row for row in rows_of(tmp_path) if len(row["ranks"]) == 2][-2:])
    finally:
        sampler.stop()
    assert all(row["gpus"] == [] for row in rows)
    assert status_lines(tmp_path) == []


def test_sampling_off_or_no_run_folder_samples_nothing(tmp_path: Path) -> None:
    off = {**rank_environ(tmp_path, 0, 0, "0"), "HPC_TRAIN_SAMPLE_SECONDS": "0"}
    assert join_node(off, os.getpid()) is None
    no_folder = {name: value for name, value in rank_environ(tmp_path, 0, 0, "0").items()
                 if name != "HPC_TRAIN_RUN_DIR"}
    assert join_node(no_folder, os.getpid()) is None
    assert not files.folder(tmp_path).exists()


def test_which_gpus_are_the_jobs_and_whose() -> None:
    assert bound_gpus(None) is None and bound_gpus("NoDevFiles") == () and bound_gpus("1, 3") == ("1", "3")
    entries = [files.RankEntry(0, 10, ("0",), "s"), files.RankEntry(1, 11, None, "s"), files.RankEntry(2, 12, (), "s")]
    assert gpu_ranks(entries, ("0", "1")) == {"0": (0, 1), "1": (1,)}
    given = ("0", "1", "2")
    leftover = [files.RankEntry(0, 10, ("0",), "s", given), files.RankEntry(1, 11, ("1",), "s", given)]
    assert gpu_ranks(leftover, ()) == {"0": (0,), "1": (1,), "2": ()}  # 3 GPUs for 2 ranks: one left over


def test_a_ranks_cpu_share_is_of_its_own_cores() -> None:
    assert cpu_percent(None, (10.0, 5.0), 4) is None
    assert cpu_percent((0.0, 0.0), (10.0, 20.0), 4) == 50.0
