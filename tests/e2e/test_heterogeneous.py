"""Parameter servers on CPU nodes, as one heterogeneous job, on a real Slurm: a cluster of its own with a `cpu`
and a `gpu` partition (`cluster up --partition cpu:hcpu[1-2] --partition gpu:hgpu[1-2]:2 --accounting`, node
names apart from the session cluster's), brought up through the command line and down at the end.

The MNIST job runs to COMPLETED with the chief and ps on the cpu nodes and no GPU, each worker on a GPU of its
own, its input through a tf.data service on a cpu node of its own (a third component, `--data-partition cpu`), and
sacct shows GPUs on the workers' component only (AccountingStorageTRES=gres/gpu); warned mid-run, it requeues
itself and resumes with its service started again on the cpu partition, and leaves no process of its service
behind; nor does a 2-node multiworker job on the gpu partition whose service runs on a cpu node (a heterogeneous
job by it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpc_train.localslurm import control
from hpc_train.localslurm.spec import LocalCluster
from tests.e2e.jobs import FINAL_STATES, JOB_TIMEOUT, job_state, wait_for_end
from tests.e2e.test_data_service import service_processes
from tests.fake_slurm import without_slurm
from tests.mnist_data import shared_mnist

pytestmark = pytest.mark.slurm_cluster
PARTITIONS = ("cpu:hcpu[1-2]:0", "gpu:hgpu[1-2]:2")
HET_CLUSTER = LocalCluster(Path("/tmp/hpc-train-slurm-tests-het"), cpus=2, accounting=True,
                           partitions=PARTITIONS)
WHERE = ["--dir", str(HET_CLUSTER.directory), "--cpus", "2",  # no --port: free ones, read back by `down`
         *(word for spec in PARTITIONS for word in ("--partition", spec))]
HET = ["--strategy", "parameter_server", "--nodes", "2", "--gpus-per-node", "2", "--partition", "gpu",
       "--ps-partition", "cpu"]
# The job's tf.data service on a cpu node, a component of its own (docs/data_service.md).
SERVED = ["--data-workers", "1", "--data-partition", "cpu"]
SHOW = ("import json, os; print('RANK', json.dumps({name: os.environ.get(name) for name in ("
        "'SLURMD_NODENAME', 'SLURM_PROCID', 'CUDA_VISIBLE_DEVICES', 'TF_CONFIG')}))")


def hpc_train(workdir: Path, env: dict[str, str], *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    # `python -m hpc_train`: the code under test, whichever hpc-train is first on PATH.
    result = subprocess.run([sys.executable, "-m", "hpc_train", *args], cwd=workdir, env=env, capture_output=True,
                            text=True, timeout=180)
    assert result.returncode == code, result.stderr
    return result


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    if os.geteuid() != 0:
        pytest.skip("a local Slurm cluster needs root")
    if shutil.which("apt-get") is None and not all(shutil.which(p) for p in ("slurmctld", "slurmdbd", "mariadbd")):
        pytest.skip("no Slurm, slurmdbd and MariaDB, and no apt-get to install them")
    root = Path(__file__).resolve().parents[2]
    cluster_env = {**without_slurm(), **control.slurm_env(HET_CLUSTER), "PYTHONPATH": str(root),
                   "PATH": f"{root / '.venv' / 'bin'}:{os.environ['PATH']}"}
    was_running = all(control.status(HET_CLUSTER).values())
    hpc_train(tmp_path_factory.mktemp("up"), dict(os.environ), "cluster", "up", "--accounting", *WHERE)
    yield cluster_env
    queued = subprocess.run(["squeue", "-h", "-o", "%i"], env=cluster_env, capture_output=True, text=True).stdout
    if queued.split():
        subprocess.run(["scancel", *queued.split()], env=cluster_env, capture_output=True)
    if not was_running:
        hpc_train(tmp_path_factory.mktemp("down"), dict(os.environ), "cluster", "down", "--accounting", *WHERE)


def submitted(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout.splitlines()[0]


@pytest.mark.tensorflow
def test_a_multiworker_mnist_job_reads_through_a_data_service_on_the_cpu_partition(env: dict[str, str],
                                                                                    tmp_path: Path) -> None:
    # Two ranks on the gpu partition, the service on a cpu node: a heterogeneous job by its service alone (issue 47).
    job = submitted(hpc_train(tmp_path, env, "submit", "--strategy", "multiworker", "--nodes", "2", "--gpus-per-node",
                              "1", "--partition", "gpu", *SERVED, "--name", "mw", "--set", "epochs=1", "--set",
                              "steps_per_epoch=4", "--set", "train_images=2048", "--set", "validation_images=1024",
                              "--set", f"data_dir={shared_mnist()}"))
    folder = tmp_path / "runs" / f"mw-{job}"
    log = tmp_path / f"slurm-mw-{job}.out"
    assert wait_for_end(job, env, lambda: log.read_text() if log.exists() else "") == ("COMPLETED", "0:0"), (
        log.read_text()[-3000:] if log.exists() else "")
    text = log.read_text()
    assert re.search(rf"^hpc-train: job {job} on hgpu\[1-2\], 2 tasks; input through the tf.data service: 1 data "
                     r"worker\(s\) of 1 CPU\(s\) on partition cpu \(example order not exact\)", text, re.M), \
        text[-3000:]
    record = json.loads((folder / "data_service.json").read_text())
    [node] = record["nodes"]
    assert record["state"] == "stopped" and node.startswith("hcpu") and record["address"].startswith(f"grpc://{node}:")
    for rank in range(2):
        said = (folder / "logs" / f"rank-{rank}.out").read_text()
        assert re.search(rf"rank {rank} is worker {rank} at hgpu\d:\d+, GPUs: 0", said), said[-2000:]
        assert f"training input through the data service at {record['address']}" in said, said[-2000:]
    assert "final_val_accuracy" in (folder / "logs" / "rank-0.out").read_text()
    accounted = subprocess.run(["sacct", "-j", job, "-X", "-n", "-P", "-o", "JobID,Partition"], env=env,
                               capture_output=True, text=True).stdout.split()
    assert sorted(accounted) == [f"{job}+0|gpu", f"{job}+1|cpu"], accounted
    deadline = time.monotonic() + 30  # (Slurm reaps a step's processes as the job ends: waited for, bounded)
    while service_processes(folder, record["address"]) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not service_processes(folder, record["address"])


def test_a_users_command_gets_the_same_cluster(env: dict[str, str], tmp_path: Path) -> None:
    # The workers a node range of a task per GPU, 2 a node: MIN 2 is the partition's every node, so Slurm gives both.
    job = submitted(hpc_train(tmp_path, env, "submit", *HET, "--nodes", "2-3", "--num-ps", "2", "--ps-nodes", "2",
                              "--name", "cmd", "--", sys.executable, "-c", SHOW))
    log = tmp_path / f"slurm-cmd-{job}.out"
    assert wait_for_end(job, env, lambda: log.read_text() if log.exists() else "") == ("COMPLETED", "0:0")
    assert re.search(rf"^hpc-train: job {job} on hcpu\[1-2\] \+ hgpu\[1-2\], 3\+4 tasks, on 2 of 2-3 nodes;",
                     log.read_text(), re.M), log.read_text()[-3000:]
    folder = tmp_path / "runs" / f"cmd-{job}"
    seen = [json.loads(re.search(r"^RANK (.*)$", (folder / "logs" / f"rank-{rank}.out").read_text(), re.M).group(1))
            for rank in range(7)]
    assert [rank["SLURM_PROCID"] for rank in seen] == [str(rank) for rank in range(7)]
    configs = [json.loads(rank["TF_CONFIG"]) for rank in seen]
    assert all(config["cluster"] == configs[0]["cluster"] for config in configs)
    hosts = {role: [address.split(":")[0] for address in members] for role, members in configs[0]["cluster"].items()}
    assert hosts == {"chief": ["hcpu1"], "ps": ["hcpu1", "hcpu2"], "worker": ["hgpu1", "hgpu1", "hgpu2", "hgpu2"]}
    assert [rank["CUDA_VISIBLE_DEVICES"] for rank in seen[:3]] == ["", "", ""]


@pytest.mark.parametrize("extra, said", [
    (["--ps-partition", "nowhere"], "--ps-partition nowhere: no such partition here; choose one of cpu, gpu"),
    (["--num-ps", "2", "--ps-nodes", "3"], "--ps-nodes 3: partition cpu has 2 node(s) in all"),
    ([*SERVED[:2], "--data-partition", "nowhere"], "--data-partition nowhere: no such partition here; choose one of "
                                                   "cpu, gpu"),
])
@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["submit", "dry-run"])
def test_what_the_cluster_cannot_give_is_refused_and_nothing_is_queued(env: dict[str, str], tmp_path: Path,
                                                                       extra: list[str], said: str,
                                                                       dry_run: list[str]) -> None:
    result = hpc_train(tmp_path, env, "submit", *HET, *extra, *dry_run, code=2)
    assert said in result.stderr and len(result.stderr.strip().splitlines()) == 1 and not result.stdout
    queued = subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True).stdout
    assert not queued.strip() and not (tmp_path / "runs").exists()


def test_the_shipped_heterogeneous_script_runs_under_plain_sbatch(env: dict[str, str], tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    small = ["--set", "epochs=1", "--set", "steps_per_epoch=4", "--set", "train_images=2048", "--set",
             "validation_images=1024"]
    script_env = {**env, "HPC_TRAIN_HOME": str(root), "HPC_TRAIN_DATA_DIR": str(shared_mnist())}
    result = subprocess.run(["sbatch", "--parsable", str(root / "slurm" / "mnist_ps_het.sh"), *small],
                            cwd=tmp_path, env=script_env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    job = result.stdout.strip().split(";")[0]
    log = tmp_path / f"slurm-mnist-ps-het-{job}.out"
    assert wait_for_end(job, env, lambda: log.read_text() if log.exists() else "") == ("COMPLETED", "0:0"), (
        log.read_text()[-3000:])
    text = log.read_text()
    assert re.search(rf"^hpc-train: job {job} on hcpu1 \+ hgpu\[1-2\], 2\+4 tasks", text, re.M), text[-3000:]
    assert re.search(r"^0: hpc-train bootstrap: rank 0 is chief 0 at hcpu1:\d+, GPUs: none$", text, re.M)
    assert len(re.findall(r"is worker \d at hgpu[12]:\d+, GPUs: [01]$", text, re.M)) == 4, text[-3000:]
    # Followed as a submitted job: the record the job body wrote holds both components, not component 0's alone.
    [record] = [json.loads(path.read_text()) for path in tmp_path.glob(f"runs/*-{job}/job.json")]
    assert (record["nodes"], record["tasks"]) == (3, 6) and [part["tasks"] for part in record["components"]] == [2, 4]


# Rank 2 (the first worker) killed by a signal on the job's first run, as a crash would; every rank done after.
WORKER_ONCE_KILLED = ("import os; os.environ['SLURM_PROCID'] == '2' and os.environ.get('SLURM_RESTART_COUNT', '0') "
                      "== '0' and os.kill(os.getpid(), 9); print('done', os.environ['SLURMD_NODENAME'])")


def test_a_worker_killed_is_retried_with_its_node_excluded_in_the_workers_component(env: dict[str, str],
                                                                                  tmp_path: Path) -> None:
    args = [*HET, "--nodes", "1", "--name", "crashy", "--", sys.executable, "-c", WORKER_ONCE_KILLED]
    job = submitted(hpc_train(tmp_path, env, "submit", *args))
    log = tmp_path / f"slurm-crashy-{job}.out"
    assert wait_for_end(job, env, lambda: log.read_text() if log.exists() else "") == ("COMPLETED", "0:0"), (
        log.read_text()[-3000:])
    said = log.read_text()
    blamed = re.search(r"attempt 2 of 4: retried after (hgpu\d) task \d was killed; \1 excluded", said)
    assert blamed, said[-3000:]
    shown = subprocess.run(["scontrol", "show", "job", "-o", job], env=env, capture_output=True,
                           text=True).stdout.splitlines()
    excluded = [re.search(r"ExcNodeList=(\S+)", line).group(1) for line in shown]
    assert excluded == ["(null)", blamed.group(1)], shown
    second = (tmp_path / "runs" / f"crashy-{job}" / "logs" / "rank-2.out").read_text().splitlines()[-1]
    assert second.startswith("done hgpu") and blamed.group(1) not in second, second


def test_logs_per_rank_and_cancel_take_the_jobs_one_id(env: dict[str, str], tmp_path: Path) -> None:
    """... and a cancelled job's MLflow run (the default store, beside the run folders) ends KILLED, not RUNNING."""
    pytest.importorskip("mlflow")
    job = submitted(hpc_train(tmp_path, env, "submit", *HET, "--nodes", "1", "--name", "long", "--track", "mlflow",
                              "--", "sh", "-c", 'echo "rank $SLURM_PROCID on $SLURMD_NODENAME"; sleep 120'))
    logs = tmp_path / "runs" / f"long-{job}" / "logs"
    deadline = time.monotonic() + 60
    # Each component's first rank, waited for: the components' steps start one after the other.
    while not all(f"rank {rank} on " in (path.read_text() if (path := logs / f"rank-{rank}.out").exists() else "")
                  for rank in (0, 3)):
        assert time.monotonic() < deadline, "the ranks did not start within 60 s"
        time.sleep(0.5)
    assert re.search(r"rank 3 on hgpu\d", hpc_train(tmp_path, env, "logs", job, "--rank", "3").stdout)
    assert re.search(r"rank 0 on hcpu\d", hpc_train(tmp_path, env, "logs", job, "--rank", "0").stdout)
    hpc_train(tmp_path, env, "cancel", job)
    assert wait_for_end(job, env, lambda: "")[0] == "CANCELLED"
    # slurmdbd takes the components' ends a moment after (seconds on a loaded machine): wait for them.
    deadline, states = time.monotonic() + 60, []
    while time.monotonic() < deadline:
        states = subprocess.run(["sacct", "-j", job, "-X", "-n", "-P", "-o", "JobID,State"], env=env,
                                capture_output=True, text=True).stdout.splitlines()
        if len(states) == 2 and all(not state.split("|")[1].startswith(("RUNNING", "PENDING")) for state in states):
            break
        time.sleep(0.5)
    assert [state.split("|")[1].split()[0] for state in states] == ["CANCELLED", "CANCELLED"], states
    from mlflow.tracking import MlflowClient

    store = MlflowClient(f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}")
    [run] = store.search_runs([store.get_experiment_by_name("long").experiment_id])
    assert run.info.status == "KILLED", (tmp_path / "runs" / f"long-{job}" / "tracking.json").read_text()


def test_a_parameter_server_mnist_job_runs_as_one_heterogeneous_job_and_a_warning_requeues_it(env: dict[str, str],
                                                                                             tmp_path: Path) -> None:
    job = submitted(hpc_train(tmp_path, env, "submit", *HET, *SERVED, "--name", "het", "--set", "epochs=4", "--set",
                              "steps_per_epoch=8", "--set", "train_images=2048", "--set", "validation_images=1024",
                              "--set", f"data_dir={shared_mnist()}"))
    folder = tmp_path / "runs" / f"het-{job}"
    logs = [folder / "logs" / f"rank-{rank}.out" for rank in range(6)]
    log = tmp_path / f"slurm-het-{job}.out"
    deadline = time.monotonic() + JOB_TIMEOUT  # (2+4 ranks and the service to start, on a loaded machine)
    while "epoch 1/4" not in (logs[0].read_text() if logs[0].exists() else ""):
        ended = job_state(job, env)[0] in FINAL_STATES
        assert time.monotonic() < deadline and not ended, log.read_text()[-3000:] if log.exists() else "no job log"
        time.sleep(0.5)
    # As `--signal=B:USR1@...` would near the time limit: to the batch shell, which passes it on to the step.
    subprocess.run(["scancel", "--batch", "--signal=USR1", job], env=env, check=True)
    assert wait_for_end(job, env, lambda: log.read_text()) == ("COMPLETED", "0:0"), logs[0].read_text()[-3000:]
    said = [re.search(r"rank (\d) is (\w+) (\d) at (\w+):\d+, GPUs: (\S+)$", path.read_text(), re.M) for path in logs]
    assert all(said), [path.read_text()[-1500:] for path in logs]
    ranks = [(line.group(2), line.group(4)[:4], line.group(5)) for line in said]
    assert ranks[:2] == [("chief", "hcpu", "none"), ("ps", "hcpu", "none")]
    assert [role for role, _, _ in ranks[2:]] == ["worker"] * 4 and all(host == "hgpu" for _, host, _ in ranks[2:])
    assert {(line.group(4), line.group(5)) for line in said[2:]} == {  # each worker a GPU of its own
        ("hgpu1", "0"), ("hgpu1", "1"), ("hgpu2", "0"), ("hgpu2", "1")}
    text = log.read_text() + logs[0].read_text()
    assert re.search(r"requeueing job \d+ \(requeue 1 of at most 5\): it resumes from there", text), text[-3000:]
    assert re.search(rf"^hpc-train: job {job} \(restart 1\) on hcpu\d \+ hgpu\[1-2\], 2\+4 tasks", text, re.M)
    metrics = json.loads((folder / "metrics.json").read_text())
    assert [epoch["epoch"] for epoch in metrics["epochs"]] == [1, 2, 3, 4]
    assert "final_val_accuracy" in logs[0].read_text()
    accounted = subprocess.run(["sacct", "-j", job, "-X", "-n", "-P", "-o", "JobID,Partition,AllocTRES"], env=env,
                               capture_output=True, text=True).stdout.split()
    parts = dict(line.split("|", 1) for line in accounted)
    assert set(parts) == {f"{job}+0", f"{job}+1", f"{job}+2"}, accounted
    assert parts[f"{job}+0"].startswith("cpu|") and "gres/gpu" not in parts[f"{job}+0"]
    assert parts[f"{job}+1"].startswith("gpu|") and "gres/gpu=4" in parts[f"{job}+1"]
    assert parts[f"{job}+2"].startswith("cpu|") and "gres/gpu" not in parts[f"{job}+2"]  # the data service's
    status = hpc_train(tmp_path, env, "status", job).stdout
    assert "completed, exit 0:0 [sacct]" in status and "part 0:  cpu, 1 node(s), 2 task(s) (chief, ps)" in status
    assert "part 1:  gpu, 2 node(s), 4 task(s) (worker), 2 GPU(s) per node" in status, status
    # The requeued attempt started the service again on its cpu node (its journal: the run folder's).
    assert_served_on_a_cpu_node(folder, log.read_text(), job, attempts=2)


def assert_served_on_a_cpu_node(folder: Path, log: str, job: str, attempts: int) -> None:
    """The job's tf.data service ran on a cpu node of its own component (not the chief's and ps's), every attempt
    (its dispatcher's log: a start each), the chief read its input through it, and none of it is left running."""
    assert re.search(rf"^hpc-train: job {job} on hcpu1 \+ hgpu[^;]*; input through the tf.data service: 1 data "
                     r"worker\(s\) of 1 CPU\(s\) on partition cpu \(example order not exact\)", log, re.M), log[-3000:]
    record = json.loads((folder / "data_service.json").read_text())
    assert (record["state"], record["attempt"], record["nodes"]) == ("stopped", attempts, ["hcpu2"]), record
    address = record["address"]
    assert address.startswith("grpc://hcpu2:") and f"data service at {address}" in log, log[-3000:]
    dispatcher = (folder / "logs" / "data-dispatcher.out").read_text()
    assert dispatcher.count("data service dispatcher on hcpu2:") == attempts, dispatcher[-3000:]
    assert f"data service worker on hcpu2:" in (folder / "logs" / "data-worker-0.out").read_text()
    assert f"training input through the data service at {address}" in (folder / "logs" / "rank-0.out").read_text()
    deadline = time.monotonic() + 30  # (Slurm reaps a step's processes as the job ends: waited for, bounded)
    while service_processes(folder, address) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not service_processes(folder, address)
