"""The job body's idle watch, through a whole job on this machine (`submit --local`: the mock launcher, each
rank's supervisor joining its node's sampler, a stand-in NVML first on PYTHONPATH, a stand-in nvidia-smi on PATH):
the idle GPU gets one line in the job's log naming its node and rank, and status names it while the job runs."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.fake_nvidia import install_nvidia_smi
from tests.fake_nvml import install_pynvml
from tests.fake_slurm import without_slurm

WAIT = 90.0  # the most the job may take to say it (Python's start on a busy machine; the threshold is 3 s)
# Each rank waits for the test's word (the file), so that the job runs while status is asked.
WAITING = "import os, pathlib, time\nwhile not pathlib.Path('release').exists(): time.sleep(0.1)\n"


@pytest.mark.mock_twin("tests/e2e/test_gpus.py::test_the_mission_command_trains_on_4_nodes_with_2_gpus_each")
def test_a_local_jobs_idle_gpu_is_said_once_in_its_log_and_named_by_status(tmp_path: Path) -> None:
    env = {**without_slurm(), "PATH": install_nvidia_smi(tmp_path / "bin", 2),
           "PYTHONPATH": install_pynvml(tmp_path / "nvml", {0: 90.0, 1: 0.0}),
           "HPC_TRAIN_SAMPLE_SECONDS": "0.5", "HPC_TRAIN_IDLE_MINUTES": str(3 / 60)}
    job = subprocess.Popen([sys.executable, "-m", "hpc_train", "submit", "--local", "--nodes", "2", "--gpus-per-node",
                            "1", "--no-snapshot", "--name", "idle", "--", sys.executable, "-c", WAITING],
                           cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in job.stdout], daemon=True)
    reader.start()
    said = []
    try:
        while not any(" idle for " in line for line in said):
            said.append(lines.get(timeout=WAIT))
        shown = subprocess.run([sys.executable, "-m", "hpc_train", "status"], cwd=tmp_path, env=env,
                               capture_output=True, text=True).stdout
    finally:
        (tmp_path / "release").touch()
        assert job.wait(timeout=WAIT) == 0
    reader.join(timeout=WAIT)
    said += [lines.get() for _ in range(lines.qsize())]
    idle = [line for line in said if " idle for " in line]
    assert len(idle) == 1 and re.fullmatch(r"hpc-train: 127\.0\.0\.2 GPU 1 \(rank 1\) idle for \d s: under 5% since "
                                            r"\d\d:\d\d:\d\d\n", idle[0]), said
    assert re.search(r"^GPUs: 1 of 2 busy over 50%; 127\.0\.0\.2 GPU 1 idle for \d+ s$", shown, re.M), shown
    assert re.search(r"^  idle: 127\.0\.0\.2 GPU 1 \(rank 1\) idle for \d+ s", shown, re.M), shown
    kept = sorted(os.listdir(next((tmp_path / "runs").glob("idle-*")) / "utilization"))
    assert kept == ["127.0.0.1.jsonl", "127.0.0.2.jsonl", "ranks"], kept  # a file per (mock) node
