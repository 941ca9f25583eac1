"""End to end on a real Slurm, docs/data_service.md:

- a 2-node multiworker MNIST job trains through TensorFlow's data service (a dispatcher and two data workers
  started by the job body beside the ranks), loses a data worker mid-run (the dispatcher gives its share to the
  other), is warned as near its time limit, requeues itself, trains on with a service restored from its journal to
  COMPLETED, its allocation holding each node's worker's CPU beside its rank's;
- a parameter-server MNIST job trains through a service sized by `--data-workers auto` (one worker to start; under
  ParameterServerStrategy the ledger measures no input wait, so it stays at one, silently), which is killed mid-run
  and started again by the job body, to COMPLETED; its service's processes sampled their CPU use, which `report`
  draws (data_service.png);

and neither leaves any of the service's processes behind. Two short jobs: the suite's time is shared."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hpc_train.localslurm import control
from hpc_train.localslurm.spec import LocalCluster
from tests.e2e.jobs import rank_pid, wait_for_end
from tests.fake_slurm import without_slurm
from tests.mnist_data import shared_mnist

pytestmark = [pytest.mark.slurm_cluster, pytest.mark.tensorflow]
ROOT = Path(__file__).resolve().parents[2]
SERVERS = b"hpc_train.data_service.servers"


def service_processes(run_dir: Path, address: str) -> list[int]:
    """The pids of this job's data service processes on this host (the local cluster's nodes are all here), srun's
    included: a dispatcher or worker whose command line names the job's journal or its dispatcher's address."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes()
        except OSError:
            continue  # it ended meanwhile
        if SERVERS in words and (str(run_dir.resolve()).encode() in words or address.encode() in words):
            found.append(int(cmdline.parent.name))
    return found


def wait_for_text(logs, text: str, seconds: float = 300) -> None:  # logs: () -> str
    deadline = time.monotonic() + seconds
    while text not in logs():
        assert time.monotonic() < deadline, f"no {text!r} within {seconds} s: {logs()[-3000:]}"
        time.sleep(0.2)


def kill_data_worker(job_id: str, index: int, cluster: LocalCluster, role: bytes = b"worker") -> None:
    """SIGKILL to the job's data worker `index` (its place in the workers' step), or its dispatcher (`role`):
    lost, as a crash would lose it."""
    deadline = time.monotonic() + 60
    while (pid := rank_pid(job_id, index, lambda comm, cmdline: comm.startswith("python")
                           and SERVERS + b"\0" + role + b"\0" in cmdline,
                           str(cluster.conf))) is None:
        assert time.monotonic() < deadline, f"no data {role.decode()} {index} of job {job_id}"
        time.sleep(0.2)
    os.kill(pid, signal.SIGKILL)


def test_a_two_node_job_trains_through_the_data_service_and_leaves_no_server(cluster: LocalCluster,
                                                                             tmp_path: Path) -> None:
    env = {**without_slurm(), **control.slurm_env(cluster), "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    submitted = subprocess.run(["hpc-train", "submit", "--nodes", "2", "--name", "served", "--data-workers", "2",
                                "--set", f"data_dir={shared_mnist()}", "--set", "epochs=5", "--set",
                                "train_images=8000"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.splitlines()[0].strip()
    folder = tmp_path / "runs" / f"served-{job_id}"

    def logs() -> str:
        return "".join(path.read_text(errors="replace")
                       for path in [*sorted(folder.glob("slurm-*.out")), *sorted(folder.glob("logs/*"))])

    # A data worker killed once the ranks train: the dispatcher gives its share of the stream to the other worker,
    # whose step runs on, and training goes on (the body starts the workers' step again only when it ends).
    wait_for_text(logs, "training: first steps done")
    kill_data_worker(job_id, 1, cluster)
    # status lists the service's processes and their state: both steps still run (the workers' with one task left).
    status = subprocess.run(["hpc-train", "status", job_id], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert re.search(r"data service: dispatcher grpc://node1:\d+ running \(step \d+\.\d+\); 2 data worker\(s\) on "
                     r"port\(s\) \d+,\d+ running \(step", status.stdout), status.stdout + status.stderr
    # The job holds each node's rank's CPU and its worker's (--mincpus=2): Slurm's own record of the allocation.
    shown = subprocess.run(["scontrol", "show", "job", "-d", job_id], env=env, capture_output=True, text=True).stdout
    assert "NumCPUs=4 " in shown and "MinCPUsNode=2 " in shown, shown  # (its ranks alone: 2)
    # Warned after its first epoch (four more to go: seconds, enough to be warned in), as `--signal=B:USR1@...` would
    # near the time limit: it saves and requeues.
    wait_for_text(logs, "epoch 1/5")
    subprocess.run(["scancel", "--batch", "--signal=USR1", job_id], env=env, check=True)
    assert wait_for_end(job_id, env, logs) == ("COMPLETED", "0:0"), logs()[-4000:]
    text = logs()
    assert f"hpc-train: job {job_id} (restart 1) on node[1-2]" in text, text[-3000:]
    dispatcher = (folder / "logs" / "data-dispatcher.out").read_text()
    # The second attempt's dispatcher read the first's journal and goes on after it: TensorFlow's journal writer
    # starts the file after the last one it read (its "Restored from journal" log line is not always flushed
    # to the log before the server ends, so the files are what is checked).
    segments = sorted(path.name for path in (folder / "data_service" / "tf_data_dispatcher_journal").iterdir())
    assert segments == ["journal_0", "journal_1"], (segments, dispatcher[-3000:])
    # The start line says the trade; the body says where the service listens; every rank reads through it.
    assert re.search(rf"hpc-train: job {job_id} on node\[1-2\], 2 tasks; input through the tf.data service: 2 data "
                     r"worker\(s\) of 1 CPU\(s\) beside the ranks \(example order not exact\)", text), text[-3000:]
    address = re.search(r"data service at (grpc://node1:(\d+)) \(journal in", text)
    assert address, text[-3000:]
    ranks = [(folder / "logs" / f"rank-{rank}.out").read_text() for rank in range(2)]
    for attempt in (1, 2):  # each attempt's ranks share a job of the service of their own
        assert all(re.search(rf"training input through the data service at {address.group(1)} \(job hpc-train-"
                             rf"{job_id}-attempt{attempt}-\d+", rank) for rank in ranks), ranks[0][-3000:]
    workers = [(folder / "logs" / f"data-worker-{index}.out").read_text() for index in range(2)]
    assert all(f"dispatcher {address.group(1)}" in worker for worker in workers), workers
    # The last attempt's service ended by the body after the step (its stop file: exit 0), not killed.
    assert dispatcher.rstrip().endswith("DispatchServer stopped") and all(
        worker.rstrip().endswith("WorkerServer stopped") for worker in workers), workers
    # The dispatcher's journal, in the run folder, holds the job the ranks shared.
    journal = b"".join(path.read_bytes() for path in (folder / "data_service").rglob("*") if path.is_file())
    assert re.search(rb"hpc-train-" + job_id.encode() + rb"-attempt1-\d+", journal)
    assert "started again" not in text, text[-3000:]  # two workers: the one left took the lost one's share
    status = subprocess.run(["hpc-train", "status", job_id], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert "  data service: stopped after the ranks' step" in status.stdout.splitlines(), status.stdout
    assert json.loads((folder / "metrics.json").read_text())["world_size"] == 2
    assert [row["attempt"] for row in json.loads((folder / "ledger.json").read_text())["attempts"]] == [1, 2]
    # The service ended with the job: no dispatcher or worker of it left on this host (Slurm reaps a step's
    # processes as the job ends; waited for, bounded).
    deadline = time.monotonic() + 30
    while service_processes(folder, address.group(1)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not service_processes(folder, address.group(1))


def test_a_parameter_server_job_trains_through_a_lone_data_worker_started_again(cluster: LocalCluster,
                                                                                  tmp_path: Path) -> None:
    env = {**without_slurm(), **control.slurm_env(cluster), "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}",
           "HPC_TRAIN_SAMPLE_SECONDS": "2"}  # (the service's processes sample themselves: a few samples in a short job)
    submitted = subprocess.run(["hpc-train", "submit", "--nodes", "2", "--ntasks-per-node", "2", "--name", "served-ps",
                                "--strategy", "parameter_server", "--data-workers", "auto", "--set",
                                f"data_dir={shared_mnist()}", "--set", "epochs=3", "--set", "train_images=4000"],
                               cwd=tmp_path, env=env, capture_output=True, text=True)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.splitlines()[0].strip()
    folder = tmp_path / "runs" / f"served-ps-{job_id}"

    def logs() -> str:
        return "".join(path.read_text(errors="replace")
                       for path in [*sorted(folder.glob("slurm-*.out")), *sorted(folder.glob("logs/*"))])

    wait_for_text(logs, "training: first steps done")
    kill_data_worker(job_id, 0, cluster)
    # Then its dispatcher: started again at its address from its journal; the worker and the chief find it there.
    wait_for_text(logs, "started again (restart 1 of at most 5)")
    kill_data_worker(job_id, 0, cluster, role=b"dispatcher")
    assert wait_for_end(job_id, env, logs) == ("COMPLETED", "0:0"), logs()[-4000:]
    text = logs()
    assert "data service: its workers' step ended" in text and "started again (restart 1 of at most 5)" in text, \
        text[-3000:]
    assert re.search(r"data service: its dispatcher's step ended \(exit \d+\) while the ranks ran; started again "
                     r"from its journal \(restart 1 of at most 5\)", text), text[-3000:]
    address = re.search(r"data service at (grpc://node1:(\d+)) \(journal in", text)
    assert address, text[-3000:]
    # The chief (the coordinator, which makes each worker's dataset) reads through the service.
    assert f"training input through the data service at {address.group(1)}" in text, text[-3000:]
    worker = (folder / "logs" / "data-worker-0.out").read_text()
    assert worker.count(f"data service worker on ") == 2 and worker.rstrip().endswith("WorkerServer stopped"), worker
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["strategy"] == "parameter_server" and [epoch["epoch"] for epoch in metrics["epochs"]] == [1, 2, 3]
    assert "auto-sized data workers (1 to 8)" in text and "hpc-train: data workers" not in text, text[-3000:]
    # The dispatcher's step of one task is not told the job's 2 tasks a node (srun would say it ignores them).
    assert "can't honor --ntasks-per-node" not in text, text[-3000:]
    assert json.loads((folder / "data_service.json").read_text())["auto"]["workers"] == 1
    sampled = {path.name.split("-")[0] for path in (folder / "utilization" / "data_service").glob("*.jsonl")}
    assert sampled == {"dispatcher", "worker"}, sampled
    report = subprocess.run(["hpc-train", "report", job_id], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert any(line.startswith("wrote ") and line.endswith(f"served-ps-{job_id}/data_service.png (the data service's "
                                                         "CPU use, per process)") for line in report.stdout.splitlines()), \
        report.stdout + report.stderr
    assert (folder / "data_service.png").read_bytes()[:4] == b"\x89PNG"
    deadline = time.monotonic() + 30
    while service_processes(folder, address.group(1)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not service_processes(folder, address.group(1))
