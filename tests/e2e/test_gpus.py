"""GPUs through Slurm's GRES on the local cluster: the mission command end to end, and every way to ask for GPUs.

The session's cluster declares 2 GPUs per node (fake device files, so TensorFlow trains on the CPU). Binding is
checked per rank from Slurm's own variables (SLURM_STEP_GPUS and what the bootstrap exported), never from
variables a test set by hand. The mission's GPUs are sampled as it trains (a stand-in NVML first on PYTHONPATH,
tests/fake_nvml.py): its idle GPUs named by status while it runs, and once each in the job's log.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from hpc_train.localslurm import control
from hpc_train.localslurm.spec import LocalCluster
from hpc_train.runs.joblog import job_log_path
from tests.e2e.jobs import FINAL_STATES, JOB_TIMEOUT
from tests.fake_slurm import without_slurm
from tests.e2e.test_trainer_jobs import ROOT, Job
from tests.e2e.test_task_modules import SubmittedJob, submit
from tests.fake_nvml import install_pynvml
from tests.mnist_data import shared_mnist

pytestmark = pytest.mark.slurm_cluster
IDLE_SECONDS = 3  # the idle threshold of the mission's samples
SHOW_GPUS = ("import json, os; print('GPUS', json.dumps({name: os.environ.get(name) for name in ("
             "'SLURMD_NODENAME', 'SLURM_PROCID', 'SLURM_STEP_GPUS', 'CUDA_VISIBLE_DEVICES')}))")


def gpus_by_rank(logs: list[str]) -> list[dict[str, str]]:
    return [json.loads(re.search(r"^(?:\d+: )?GPUS (.*)$", log, re.M).group(1)) for log in logs]


def assert_disjoint_per_node(ranks: list[dict[str, str]], per_task: int) -> None:
    """Each rank sees `per_task` GPUs of its node's step allocation, and no two ranks on a node share one."""
    by_node: dict[str, list[set[str]]] = defaultdict(list)
    for rank in ranks:
        seen = set(rank["CUDA_VISIBLE_DEVICES"].split(","))
        assert len(seen) == per_task and seen <= set(rank["SLURM_STEP_GPUS"].split(",")), rank
        by_node[rank["SLURMD_NODENAME"]].append(seen)
    for node, shares in by_node.items():
        assert len(set.union(*shares)) == per_task * len(shares), (node, shares)


def status_naming_an_idle_gpu(job: SubmittedJob, workdir: Path) -> str:
    """`hpc-train status` of the running job, once it names an idle GPU (the job must not end first)."""
    deadline = time.monotonic() + JOB_TIMEOUT
    while time.monotonic() < deadline:
        shown = subprocess.run(["hpc-train", "status", job.id], cwd=workdir, env=job.env, capture_output=True,
                               text=True).stdout
        if "  idle: " in shown:
            return shown
        assert job.state()[0] not in FINAL_STATES, (shown, job.log(0, "err")[-3000:])
        time.sleep(0.5)
    pytest.fail(f"status never named an idle GPU of job {job.id} within {JOB_TIMEOUT} s")


def assert_idle_gpus_said(job: SubmittedJob, workdir: Path) -> None:
    """One line per node in the job's log for its GPU 1 (and its rank), none for GPU 0; every node sampled; the
    timeline drawn."""
    said = re.findall(r"^hpc-train: (node\d+) GPU (\d) \(rank (\d)\) idle for \d+ s: under 5%",
                      job_log_path(job.folder).read_text(), re.M)  # the job body's log
    assert sorted(said) == sorted(set(said)) and {gpu for _, gpu, _ in said} == {"1"}, said
    assert len(said) == 4 and all(int(rank) % 2 == 1 for _, _, rank in said), said
    sampled = sorted(path.stem for path in (job.folder / "utilization").glob("*.jsonl"))
    assert sampled == sorted(node for node, _, _ in said), sampled
    rows = [json.loads(line) for line in (job.folder / "utilization" / f"{sampled[0]}.jsonl").read_text().splitlines()]
    last = rows[-1]
    # Both GPUs in every row; both ranks in some (a rank that has ended is not read: they end one by one).
    assert [gpu["gpu"] for gpu in last["gpus"]] == ["0", "1"] and max(len(row["ranks"]) for row in rows) == 2, last
    # Each rank's memory and cores, read while it runs (a rank read as it exits may show none: its last rows).
    assert any(all(rank["rss"] > 0 and rank["cores"] >= 1 for rank in row["ranks"]) for row in rows
               if len(row["ranks"]) == 2), rows[-3:]
    report = subprocess.run(["hpc-train", "report", job.id], cwd=workdir, env=job.env, capture_output=True, text=True)
    assert (job.folder / "utilization.png").exists(), report.stdout + report.stderr


def test_the_mission_command_trains_on_4_nodes_with_2_gpus_each(cluster: LocalCluster, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # Each node's GPU 1 idles, GPU 0 works, as a stand-in NVML at the binding's seam says (tests/fake_nvml.py);
    # sampled every second, idle after 3 s.
    monkeypatch.setenv("PYTHONPATH", install_pynvml(tmp_path / "nvml", {0: 90.0, 1: 0.0}))
    monkeypatch.setenv("HPC_TRAIN_SAMPLE_SECONDS", "1")
    monkeypatch.setenv("HPC_TRAIN_IDLE_MINUTES", str(IDLE_SECONDS / 60))
    job = submit(cluster, tmp_path, "mission", "--nodes", "4", "--gpus-per-node", "2", "--set", "epochs=1",
                 "--set", "train_images=1024", "--set", f"data_dir={shared_mnist()}")
    shown = status_naming_an_idle_gpu(job, tmp_path)
    assert re.search(r"^GPUs: \d of \d busy over 50%(; node\d+ GPU 1 idle for \d+ s)+$", shown, re.M), shown
    idle_for = re.search(r"^  idle: node\d+ GPU 1 \(rank [1357]\) idle for (\d+) s: under 5%", shown, re.M)
    assert idle_for and int(idle_for.group(1)) <= IDLE_SECONDS + 60, shown
    assert job.wait() == ("COMPLETED", "0:0"), job.log(0, "err")[-3000:]
    assert_idle_gpus_said(job, tmp_path)
    errors = [job.log(rank, "err") for rank in range(8)]
    lines = [re.search(r"rank (\d) is worker (\d) at (node\d+):\d+, GPUs: (\d)$", log, re.M) for log in errors]
    assert all(lines), errors[0][-2000:]
    assert [int(line.group(1)) for line in lines] == list(range(8))
    by_node = defaultdict(set)
    for line in lines:
        by_node[line.group(3)].add(line.group(4))
    assert len(by_node) == 4 and all(gpus == {"0", "1"} for gpus in by_node.values()), by_node
    for rank, log in enumerate(errors):
        gpu = lines[rank].group(4)
        assert log.count(f"bound to GPU {gpu} by Slurm; TensorFlow sees no GPU: CPU") == 1, log[-2000:]
        assert "cuInit" not in log and "absl::InitializeLog" not in log, log[-2000:]  # the start-up noise
    assert "multiworker: 8 workers, 8 replica(s) in sync" in job.log(0)


@pytest.mark.parametrize("options, per_task", [((), 1), (("--one-task-per-node",), 2), (("--gres", "gpu:2"), 1)],
                         ids=["gpus-per-node", "one-task-per-node", "gres"])
def test_every_way_to_ask_for_gpus_binds_each_rank_its_own(cluster: LocalCluster, tmp_path: Path,
                                                           options: tuple[str, ...], per_task: int) -> None:
    job = submit(cluster, tmp_path, "gpus", "--gpus-per-node", "2", *options, "--", sys.executable, "-c", SHOW_GPUS)
    assert job.wait() == ("COMPLETED", "0:0"), job.log(0, "err")
    ranks = 4 // per_task
    seen = gpus_by_rank([job.log(rank) for rank in range(ranks)])
    assert [rank["SLURM_PROCID"] for rank in seen] == [str(rank) for rank in range(ranks)]
    assert_disjoint_per_node(seen, per_task)
    assert "no GPU driver here" in job.log(0, "err")  # said once per task, before the command starts


def test_srun_gpus_per_task_binding_is_kept(cluster: LocalCluster, tmp_path: Path) -> None:
    env = {**without_slurm(), **control.slurm_env(cluster), "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    (tmp_path / "show_gpus.py").write_text(SHOW_GPUS + "\n")
    result = subprocess.run(
        ["sbatch", "--parsable", "-N2", "--ntasks-per-node=2", "--gpus-per-task=1", "-o", "slurm-gpus-%j.out",
         "--wrap", f"srun --label hpc-train bootstrap -- {sys.executable} show_gpus.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    job = Job(result.stdout.strip(), tmp_path, env)
    assert job.wait() == ("COMPLETED", "0:0"), job.log()
    ranks = gpus_by_rank([line for line in job.log().splitlines() if "GPUS " in line])
    assert sorted(rank["SLURM_PROCID"] for rank in ranks) == ["0", "1", "2", "3"]
    assert_disjoint_per_node(ranks, 1)
