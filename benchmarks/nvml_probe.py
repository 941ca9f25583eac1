"""Probe, by hand on a real GPU: does the node sampler's NVML reading follow a program busy 5 s and idle 5 s by
turns? (issue 44: about 50% over the run, and every idle gap seen). Run on a GPU machine with PyTorch:

    PYTHONPATH=.:dist/wheels/nvidia_ml_py-13.615.71-py3-none-any.whl python benchmarks/nvml_probe.py [OUT]

It goes through hpc-train's own code, not a second reading of NVML: this process registers as the node's rank
0 bound to GPU 0 (utilization/sampler.py's join_node, the call every rank makes), the node's sampler thread reads
NVML every second into OUT/run/utilization/NODE.jsonl, and the job body's idle watch (utilization/watch.py,
idle after 3 s under 5%) says each gap as it would in a job's log. Meanwhile PyTorch multiplies matrices on GPU 0
for 5 s, sleeps 5 s, six times. Prints and writes OUT/nvml_probe.json: the mean utilization, the idle gaps found
in the samples against the program's own, and the watch's lines.

`--stand-in`: no GPU needed; a stand-in NVML (tests/fake_nvml.py) follows the phases, to check the probe itself.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from hpc_train.utilization import files
from hpc_train.utilization.nvml import open_nvml
from hpc_train.utilization.sampler import join_node
from hpc_train.utilization.settings import Sampling
from hpc_train.utilization.watch import IdleWatch

PHASE_SECONDS = 5.0
CYCLES = 6
EVERY = 1.0  # seconds between samples: the probe looks for 5 s gaps (a job's default is 10 s)
IDLE_BELOW, IDLE_AFTER = 5.0, 3.0


def gpu_work(stand_in: object | None) -> tuple[object, str]:
    """(a function that keeps GPU 0 busy for some seconds, the device's name)."""
    if stand_in is not None:
        def pretend(seconds: float) -> None:
            stand_in.utilizations[0] = 100.0
            time.sleep(seconds)
            stand_in.utilizations[0] = 0.0
        return pretend, "a stand-in NVML (no GPU)"
    try:
        import torch
    except ImportError:
        sys.exit("nvml_probe: no PyTorch here; run it on a GPU machine with PyTorch, or with --stand-in")
    if not torch.cuda.is_available():
        sys.exit("nvml_probe: PyTorch sees no GPU here; run it on a GPU machine, or with --stand-in")
    device = torch.device("cuda:0")
    left = torch.randn(8192, 8192, device=device)
    right = torch.randn(8192, 8192, device=device)

    def busy(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for _ in range(4):
                torch.matmul(left, right)
            torch.cuda.synchronize()
    return busy, f"{torch.cuda.get_device_name(0)} (PyTorch {torch.__version__})"


def gaps(points: list[tuple[float, float]], below: float) -> list[tuple[float, float]]:
    """(first, last) time of each run of samples under `below`, the trailing one included (pure)."""
    found: list[tuple[float, float]] = []
    start = last = None
    for t, value in points:
        if value < below:
            start = t if start is None else start
            last = t
        elif start is not None:
            found.append((start, last))
            start = None
    return found + ([(start, last)] if start is not None else [])


def main(argv: list[str]) -> int:
    stand_in = None
    if "--stand-in" in argv:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.fake_nvml import FakeNvml

        stand_in = FakeNvml({0: 0.0})
    out = Path(next((arg for arg in argv if not arg.startswith("--")), os.environ.get("OUT") or tempfile.mkdtemp()))
    run_dir = out / "run"
    run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # a job's run folder exists before its ranks start
    env = {"HPC_TRAIN_RUN_DIR": str(run_dir), "SLURMD_NODENAME": "gpunode", "SLURM_PROCID": "0",
           "SLURM_LOCALID": "0", "CUDA_VISIBLE_DEVICES": "0", "HPC_TRAIN_SAMPLE_SECONDS": str(EVERY),
           "HPC_TRAIN_IDLE_PERCENT": str(IDLE_BELOW), "HPC_TRAIN_IDLE_MINUTES": str(IDLE_AFTER / 60)}
    nvml = (lambda: open_nvml(stand_in)) if stand_in is not None else open_nvml
    if nvml() is None:
        sys.exit("nvml_probe: NVML does not start here (no nvidia-ml-py on PYTHONPATH, or no driver)")
    work, device = gpu_work(stand_in)
    said: list[tuple[float, str]] = []
    watch = IdleWatch(run_dir, Sampling(EVERY, IDLE_BELOW, IDLE_AFTER),
                      say=lambda line: said.append((time.time(), line)))
    sampler = join_node(env, os.getpid(), nvml)
    watch.start()
    time.sleep(2 * EVERY)  # a few idle samples before the first busy phase
    phases = []
    for _ in range(CYCLES):
        started = time.time()
        work(PHASE_SECONDS)
        ended = time.time()
        time.sleep(PHASE_SECONDS)
        phases.append((started, ended))
    sampler.stop()
    time.sleep(2 * EVERY)
    watch.stop()
    rows = [row for row in files.read_rows(run_dir) if phases[0][0] <= row["t"] <= phases[-1][1] + PHASE_SECONDS]
    points = [(row["t"], row["gpus"][0]["util"]) for row in rows if row["gpus"]]
    found = gaps(points, IDLE_BELOW)
    expected = [(end, end + PHASE_SECONDS) for _, end in phases]
    seen = [any(first < gap_end and last > gap_start for first, last in found) for gap_start, gap_end in expected]
    result = {
        "device": device, "samples": len(points), "every_s": EVERY,
        "mean_utilization_percent": round(sum(value for _, value in points) / max(1, len(points)), 1),
        "busy_share_of_the_program_percent": round(100 * sum(end - start for start, end in phases)
                                                    / (phases[-1][1] + PHASE_SECONDS - phases[0][0]), 1),
        "idle_gaps_of_the_program": len(expected), "idle_gaps_seen": sum(seen),
        "gaps_in_samples_s": [[round(a - phases[0][0], 1), round(b - phases[0][0], 1)] for a, b in found],
        "watch_lines": [f"+{when - phases[0][0]:.0f} s {line}" for when, line in said],
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "nvml_probe.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if sum(seen) == len(expected) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
