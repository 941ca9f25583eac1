"""End to end on a real Slurm: the job scripts submitted with sbatch to a local cluster.

The cluster (conftest.py: nodes node[1-2] and node[9-10], in its own directory
and ports) is brought up once for the session, installing Slurm when root and
apt-get allow, and stopped afterwards if this session started it. Skipped where
that cannot be.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from hpc_train.injob.retry import expand_nodes
from hpc_train.localslurm import control
from hpc_train.runs.joblog import job_log_path
from hpc_train.spec.directives import asked, differences
from hpc_train.localslurm.spec import LocalCluster
from tests.fake_slurm import without_slurm
from tests.e2e.jobs import FINAL_STATES, JOB_TIMEOUT, job_state, rank_pid, wait_for_end
from tests.mnist_data import shared_mnist
from tests.tracking.server import MlflowServer

pytestmark = [pytest.mark.slurm_cluster, pytest.mark.tensorflow]
ROOT = Path(__file__).resolve().parents[2]
# 6 epochs of 62 steps (about a second each here); a step boundary every 32 (steps_per_execution).
EPOCHS = 6
TWO_NODE_SETTINGS = ("--set", f"epochs={EPOCHS}")
# Also a save at a step boundary every 3 s: a crash loses at most that much (the weights are the same).
OFTEN = ("--set", "checkpoint_minutes=0.05")


@dataclass
class Job:
    id: str
    workdir: Path
    env: dict[str, str]

    def state(self) -> tuple[str, str]:
        return job_state(self.id, self.env)

    def wait(self) -> tuple[str, str]:
        return wait_for_end(self.id, self.env, self.log)

    def log(self) -> str:
        logs = list(self.workdir.glob(f"slurm-*-{self.id}.out"))
        return logs[0].read_text() if logs else ""

    def metrics(self) -> dict:
        [metrics] = list(self.workdir.glob(f"runs/*-{self.id}/metrics.json"))
        return json.loads(metrics.read_text())

    def digest(self) -> str:
        [digest] = set(re.findall(r"hpc-train \[worker \d\]: finished; weights digest (\w+)", self.log()))
        return digest

    def run_dir(self) -> Path:
        [run] = list(self.workdir.glob(f"runs/*-{self.id}"))
        return run

    def run_state(self) -> dict:
        return json.loads((self.run_dir() / "state.json").read_text())

    def wait_for_log(self, text: str, timeout: float = JOB_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if time.monotonic() > deadline or self.state()[0] in FINAL_STATES:
                subprocess.run(["scancel", self.id], env=self.env)
                pytest.fail(f"job {self.id} never logged {text!r}:\n{self.log()[-3000:]}")
            time.sleep(0.3)

    def wait_for_log_after(self, marker: str, text: str, timeout: float = JOB_TIMEOUT) -> None:
        """Wait for `text` in the log after `marker` (a later attempt's own line)."""
        deadline = time.monotonic() + timeout
        while text not in self.log().partition(marker)[2]:
            if time.monotonic() > deadline or self.state()[0] in FINAL_STATES:
                subprocess.run(["scancel", self.id], env=self.env)
                pytest.fail(f"job {self.id} never logged {text!r} after {marker!r}:\n{self.log()[-3000:]}")
            time.sleep(0.3)

    def scontrol(self, *command: str) -> None:
        subprocess.run(["scontrol", *command, self.id], env=self.env, check=True)

    def checkpoint_steps(self) -> list[int]:
        """The global steps of the job's whole checkpoints (TensorFlow renames a checkpoint's .index into place
        once it is complete)."""
        return [int(path.name[len("ckpt-"):-len(".index")])
                for path in (self.run_dir() / "checkpoints").glob("ckpt-*.index")] if self.started() else []

    def started(self) -> bool:
        return len(list(self.workdir.glob(f"runs/*-{self.id}"))) == 1

    def wait_for_a_checkpoint(self, timeout: float = JOB_TIMEOUT, after: int = -1) -> int:
        """The step of the job's newest whole checkpoint, once there is one (past step `after`): what a test that
        kills, stops or requeues a rank waits for when it means the job to resume (a log line can come before the
        save, and a loaded machine makes that window seconds long)."""
        deadline = time.monotonic() + timeout
        while not (steps := [step for step in self.checkpoint_steps() if step > after]):
            if time.monotonic() > deadline or self.state()[0] in FINAL_STATES:
                subprocess.run(["scancel", self.id], env=self.env)
                pytest.fail(f"job {self.id} saved no checkpoint past step {after}:\n{self.log()[-3000:]}")
            time.sleep(0.3)
        return max(steps)

    def wait_for_checkpoint_from(self, step: int, timeout: float = 60) -> Path:
        """The prefix of the newest checkpoint, once one at `step` or past it is there and the job has stopped (its
        tasks' saves on SIGTERM done). At `step` itself when the tasks stopped right after the epoch end that saved
        it (their save on SIGTERM then falls at that step)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            steps = self.checkpoint_steps()
            if steps and max(steps) >= step and self.state()[0] == "PENDING":
                return self.run_dir() / "checkpoints" / f"ckpt-{max(steps)}"
            time.sleep(0.3)
        pytest.fail(f"job {self.id} saved no checkpoint from step {step} on:\n{self.log()[-3000:]}")

    def task_lines(self) -> dict[int, str]:
        """rank -> its bootstrap line ("rank R is ROLE I at HOST:PORT, GPUs: ...")."""
        return {int(m.group(1)): m.group(0) for m in re.finditer(r"rank (\d+) is \w+ \d+ at \S+, GPUs: .*", self.log())}


def with_gpu_lines_on(script: str, directory: Path) -> Path:
    """A copy of a slurm/ script with its commented-out GPU line turned on, as a user on a GPU cluster would."""
    text = (ROOT / "slurm" / script).read_text()
    assert "##SBATCH --gpus-per-node=" in text
    copy = directory / script
    copy.write_text(text.replace("##SBATCH --gpus-per-node=", "#SBATCH --gpus-per-node="))
    return copy


def submit(cluster: LocalCluster, workdir: Path, script: str | Path, *args: str, sbatch: tuple[str, ...] = (),
           extra_env: dict[str, str] | None = None) -> Job:
    env = {**without_slurm(), **control.slurm_env(cluster), "HPC_TRAIN_HOME": str(ROOT),
           "HPC_TRAIN_DATA_DIR": str(shared_mnist()), **(extra_env or {})}
    env["SLURM_CONF"] = str(cluster.conf)
    path = script if isinstance(script, Path) else ROOT / "slurm" / script
    result = subprocess.run(["sbatch", "--parsable", *sbatch, str(path), *args], cwd=workdir,
                            env=env, capture_output=True, text=True, check=True)
    return Job(result.stdout.strip().split(";")[0], workdir, env)


def node_tmp(directory: Path) -> dict[str, str]:
    """The job's own TMPDIR (each node's, as Slurm passes the submitter's on): where its ranks' own temporary
    directories go (bootstrap/tmpdir.py), apart from what other tests beside it write in /tmp."""
    (directory / "node-tmp").mkdir(exist_ok=True)
    return {"TMPDIR": str(directory / "node-tmp")}


def left_in_tmp(job: Job) -> list[str]:
    """What the job's ranks left in its TMPDIR: their own directories, TensorFlow's autograph files (issue 46)."""
    folder = Path(job.env["TMPDIR"])
    return sorted(str(path.relative_to(folder)) for pattern in ("hpc-train-*", "**/__autograph_generated_file*")
                  for path in folder.glob(pattern))


@pytest.fixture(scope="module")
def uninterrupted(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Job:
    """The 2-node MNIST job run through, once: what an interrupted job must end up as."""
    workdir = tmp_path_factory.mktemp("uninterrupted")
    job = submit(cluster, workdir, "mnist_2node.sh", *TWO_NODE_SETTINGS, extra_env=node_tmp(workdir))
    assert job.wait() == ("COMPLETED", "0:0"), job.log()[-3000:]
    return job


def test_mnist_2node_forms_one_cluster_and_learns(uninterrupted: Job) -> None:
    log = uninterrupted.log()
    digests = re.findall(r"^(\d): hpc-train \[worker \d\]: finished; weights digest (\w+)", log, re.M)
    assert len(digests) == 2 and digests[0][1] == digests[1][1], log[-3000:]  # one cluster, one model
    assert "multiworker: 2 workers, 2 replica(s) in sync" in log
    hosts = {rank: line.split(" at ")[1].split(":")[0] for rank, line in uninterrupted.task_lines().items()}
    assert len(set(hosts.values())) == 2
    assert uninterrupted.metrics()["totals"]["final_val_accuracy"] >= 0.95
    # Only the chief writes the run's files: the other worker's scratch folder is gone once it finished.
    assert not (uninterrupted.run_dir() / ".scratch").exists()
    assert {"checkpoints", "metrics.json", "model.keras", "state.json", "tensorboard"} <= {
        path.name for path in uninterrupted.run_dir().iterdir()}
    # The ranks checked in with the job's secret, which the job body made (docs/security.md).
    assert (uninterrupted.run_dir() / "checkin.secret").stat().st_mode & 0o777 == 0o600
    assert "without a job secret" not in log and "check-in: dropped" not in log
    assert left_in_tmp(uninterrupted) == []  # no file of its ranks outlives it outside its run folder
    # The goodput ledger (docs/goodput.md): what none of its categories explains (the epochs' ends: metrics.json,
    # TensorBoard, Keras' own work) is a few percent of the demo job's: at most 10% (5.8% with the CPU 100% busy
    # beside it; a category missed, its evaluation's or its start's, would be 15-50%).
    ledger = assert_ledger_adds_up(uninterrupted, attempts=1)
    assert ledger["total"]["other"] <= 0.10 * ledger["total"]["wall"], ledger
    assert ledger["total"]["compute"] > 0 and ledger["total"]["startup"] > 0 and ledger["node_seconds"] > 0


def assert_ledger_adds_up(job: Job, attempts: int, or_more: bool = False) -> dict:
    """ledger.json's attempts, each one state.json's, their categories adding up to their starts and ends
    (within 5%). `or_more`: Slurm may start an attempt more (one whose prologue finds a node of it lost; or one it
    requeued again before the body began, which leaves no record: its number is skipped)."""
    from hpc_train.runs.ledger import CATEGORIES

    ledger = json.loads((job.run_dir() / "ledger.json").read_text())
    ended = job.run_state()["ended"]
    numbers = [entry["attempt"] for entry in ended]
    assert [row["attempt"] for row in ledger["attempts"]] == numbers, (ledger, ended)
    if or_more:
        assert len(numbers) >= attempts and numbers[0] == 1 and numbers == sorted(set(numbers)), (ledger, ended)
    else:
        assert numbers == list(range(1, attempts + 1)), (ledger, ended)
    wall = sum(entry["ended"] - entry["started"] for entry in ended)
    assert abs(sum(ledger["total"][name] for name in CATEGORIES) - wall) <= 0.05 * wall, (ledger, ended)
    return ledger


def assert_resumed_as_if_never_stopped(job: Job, uninterrupted: Job) -> None:
    """Every epoch once, and the model (so the accuracy) of the run that was never stopped."""
    assert job.wait() == ("COMPLETED", "0:0"), job.log()[-3000:]
    log = job.log()
    assert "(restart 1)" in log and re.search(r"hpc-train: resuming (in|after) epoch", log), log[-3000:]
    assert [epoch["epoch"] for epoch in job.metrics()["epochs"]] == list(range(1, EPOCHS + 1))
    assert job.digest() == uninterrupted.digest()
    accuracy, reference = (run.metrics()["totals"]["final_val_accuracy"] for run in (job, uninterrupted))
    assert abs(accuracy - reference) <= 0.01
    assert job.state()[0] == "COMPLETED" and job.run_state()["state"] == "finished"


@pytest.mark.mlflow
def test_a_warned_job_requeues_itself_then_a_slurm_requeue_skips_its_damaged_newest_checkpoint(
        cluster: LocalCluster, tmp_path: Path, uninterrupted: Job, mlflow_server: MlflowServer) -> None:
    # One job, two stops: warned of its time limit in the first attempt, it saves and requeues itself; requeued (and
    # held) by Slurm in the second, its tasks save on SIGTERM, and that newest checkpoint is damaged while it waits:
    # the third attempt falls back on the one before. Tracked in MLflow too (the slurm/*.sh scripts' --set
    # track=mlflow): one run through both requeues.
    tracked = ("--set", "track=mlflow", "--set", f"tracking_uri={mlflow_server.uri}", "--set",
               f"experiment=requeued-{tmp_path.name}")
    job = submit(cluster, tmp_path, "mnist_2node.sh", *TWO_NODE_SETTINGS, *tracked, extra_env=node_tmp(tmp_path))
    job.wait_for_log(f"epoch 1/{EPOCHS}")
    # As `--signal=B:USR1@...` would near the time limit: to the batch shell, which passes it on.
    subprocess.run(["scancel", "--batch", "--signal=USR1", job.id], env=job.env, check=True)
    job.wait_for_log("(restart 1)")
    job.wait_for_log_after("(restart 1)", "hpc-train: epoch ")  # an epoch trained in the second attempt
    saved = job.wait_for_a_checkpoint()  # the warned save, or one after it: what the third attempt falls back on
    job.scontrol("requeuehold")  # Slurm's own requeue: SIGTERM; the tasks save on it; the job waits, held
    # (The save on SIGTERM may fall at the step of `saved`: the log's epoch line reaches this test seconds late on a
    # loaded machine, and the epoch-end save read above may be the last before the SIGTERM.)
    newest = job.wait_for_checkpoint_from(saved)
    older = max(int(path.name[len("ckpt-"):-len(".index")]) for path in newest.parent.glob("ckpt-*.index")
                if path.name != f"{newest.name}.index")
    data = next(newest.parent.glob(f"{newest.name}.data-*"))
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])  # as a copy cut short
    job.scontrol("release")
    assert_resumed_as_if_never_stopped(job, uninterrupted)
    log = job.log()
    assert re.search(r"requeueing job \d+ \(requeue 1 of at most 5\): it resumes from there", log), log[-3000:]
    warned = log.split("(restart 1)")[0]
    assert "Terminated" not in warned and "Killed" not in warned  # the tasks had left before the requeue
    assert f"warning: checkpoint {newest.relative_to(tmp_path)} is damaged" in log
    assert re.search(rf"resuming (after epoch \d|in epoch \d after step \d+ of \d+) \(step {older}\)", log), log[-3000:]
    # Slurm's own requeue ended the tasks with SIGTERM (KillWait, 5 s, before SIGKILL): they saved on it.
    assert re.search(r"stopped by SIGTERM (in|after) epoch", log), log[-3000:]
    assert left_in_tmp(job) == []  # no attempt's ranks left a file in TMPDIR (issue 46)
    ledger = assert_ledger_adds_up(job, attempts=3)  # the requeues keep the attempts before
    assert ledger["requeued"] > 0 and ledger["attempts"][0]["lost"] == 0, ledger  # the warned one saved: none lost
    [run] = mlflow_server.runs(f"requeued-{tmp_path.name}")  # one run for every attempt and both ranks
    for figure in ("loss", "val_accuracy", "images_per_second"):
        assert mlflow_server.steps(run.info.run_id, figure) == list(range(1, EPOCHS + 1))  # each epoch once
    assert run.info.status == "FINISHED" and "warning: MLflow" not in log
    assert run.data.metrics["goodput"] == pytest.approx(ledger["goodput"], abs=0.01)  # the ledger, in MLflow
    assert run.data.params["epochs"] == str(EPOCHS) and run.data.params["nodes"] == "2"
    assert run.data.tags["hpc_train.job_id"] == job.id and run.data.tags["hpc_train.attempts"] == "3"
    assert "the time-limit warning" in run.data.tags["hpc_train.attempts_why"]
    artifacts = {artifact.path for artifact in mlflow_server.client().list_artifacts(run.info.run_id)}
    assert {"model.keras", "metrics.json"} <= artifacts


HOSTILE_NAME = "x'; touch PWNED #"


@dataclass(frozen=True)
class SideBySide:
    """Three short jobs run at once: two on node[1-2] together (one of them a rendered script with hostile values,
    submitted with plain sbatch), one on node[9-10] with its GPU line on; each test reads its own. One wait for
    three jobs, and one job fewer than a pair of its own for the port test."""

    rendered: Job
    beside: Job
    on_9_and_10: Job
    overlapped: bool
    folder: Path


@pytest.fixture(scope="module")
def side_by_side(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> SideBySide:
    folder = tmp_path_factory.mktemp("side by side")
    short = ("--set", "epochs=1", "--set", "train_images=2000")
    data = folder / "data 'dir' $(touch PWNED)"
    data.symlink_to(shared_mnist())
    env = {**without_slurm(), **control.slurm_env(cluster)}
    script = folder / "job.sbatch"
    subprocess.run(["hpc-train", "render", "--nodes", "2", "--name", HOSTILE_NAME, "--home", str(ROOT), "--output",
                    str(script), "--set", f"data_dir={data}", *short],
                   env={**env, "PATH": f"{ROOT / '.venv' / 'bin'}:{env['PATH']}"}, check=True, capture_output=True)
    job_id = subprocess.run(["sbatch", "--parsable", "-w", "node[1-2]", str(script)], cwd=folder, env=env,
                            capture_output=True, text=True, check=True).stdout.strip()
    rendered = Job(job_id, folder, env)
    beside = submit(cluster, folder, "mnist_2node.sh", *short, sbatch=("-w", "node[1-2]"))
    on_9_and_10 = submit(cluster, folder, with_gpu_lines_on("mnist_2node.sh", folder), *short,
                         sbatch=("-w", "node[9-10]"))
    jobs = (rendered, beside, on_9_and_10)
    overlapped = False
    while not all(job.state()[0] in FINAL_STATES for job in jobs):
        overlapped |= all(job.state()[0] == "RUNNING" for job in (rendered, beside))
        time.sleep(0.5)
    return SideBySide(rendered, beside, on_9_and_10, overlapped, folder)


def test_two_jobs_sharing_nodes_do_not_collide_on_ports(side_by_side: SideBySide) -> None:
    jobs = (side_by_side.rendered, side_by_side.beside)
    for job in jobs:
        assert job.wait() == ("COMPLETED", "0:0"), job.log()[-3000:]
    assert side_by_side.overlapped, "the two jobs never ran at the same time"
    rank_logs = side_by_side.folder / "runs" / f"{HOSTILE_NAME}-{side_by_side.rendered.id}" / "logs"
    rendered = set(re.findall(r"rank \d is worker \d at node\d+:(\d+)", "".join(
        path.read_text() for path in rank_logs.glob("rank-*.out"))))
    beside = {line.split(":")[1].split(",")[0] for line in side_by_side.beside.task_lines().values()}
    assert len(rendered) == 2 and len(beside) == 2 and not rendered & beside, (rendered, beside)


def test_nodes_9_and_10_keep_slurms_rank_order(side_by_side: SideBySide) -> None:
    # With the script's GPU line on (one GPU per node, through Slurm's GRES).
    job = side_by_side.on_9_and_10
    assert job.wait() == ("COMPLETED", "0:0"), job.log()[-3000:]
    lines = job.task_lines()
    assert lines[0].startswith("rank 0 is worker 0 at node9:") and lines[1].startswith("rank 1 is worker 1 at node10:")
    assert all(line.endswith("GPUs: 0") for line in lines.values()), lines
    assert job.log().count("bound to GPU 0 by Slurm; TensorFlow sees no GPU: CPU") == 2


def test_a_rendered_script_with_hostile_values_runs_and_creates_no_file(side_by_side: SideBySide) -> None:
    job, name, tmp_path, env = side_by_side.rendered, HOSTILE_NAME, side_by_side.folder, side_by_side.rendered.env
    job_id, script = job.id, side_by_side.folder / "job.sbatch"
    assert job.wait() == ("COMPLETED", "0:0"), job.log()[-3000:]
    assert not list(tmp_path.rglob("PWNED")) and not Path("PWNED").exists()
    run_dir = tmp_path / "runs" / f"{name}-{job_id}"
    assert sorted(path.name for path in (run_dir / "logs").iterdir()) == ["rank-0.out", "rank-1.out"]
    lines = [re.search(r"rank \d is worker \d at node\d+:\d+", (run_dir / "logs" / f"rank-{rank}.out").read_text())
             for rank in range(2)]
    assert all(lines) and lines[0].group(0).startswith("rank 0 is worker 0") and lines[1].group(0).startswith(
        "rank 1 is worker 1")
    assert json.loads((run_dir / "metrics.json").read_text())["world_size"] == 2
    assert (run_dir / "job.sbatch").read_text() == script.read_text()
    # Started with sbatch, followed as a submitted job (issue 27, 2): the job wrote its own job.json.
    record = json.loads((run_dir / "job.json").read_text())
    assert (record["job_id"], record["name"], record["nodes"], record["tasks"]) == (job_id, name, 2, 2)
    status = subprocess.run(["hpc-train", "status", job_id], cwd=tmp_path, capture_output=True, text=True,
                            env={**env, "PATH": f"{ROOT / '.venv' / 'bin'}:{env['PATH']}"})
    assert status.returncode == 0 and f"job {job_id} ({name}): completed" in status.stdout, status.stdout + status.stderr


def test_up_twice_starts_nothing_new(cluster: LocalCluster) -> None:
    before = control.status(cluster)
    control.up(cluster)
    assert control.status(cluster) == before and all(before.values())


def test_submit_runs_on_slurm_with_the_expected_tasks_and_no_hostile_side_effects(cluster: LocalCluster,
                                                                                  tmp_path: Path) -> None:
    name = "x'; touch PWNED #"
    env = {**without_slurm(), **control.slurm_env(cluster), "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    options = ["--nodes", "2", "--ntasks-per-node", "2", "--name", name, "--set", f"data_dir={shared_mnist()}",
               "--set", "epochs=1", "--set", "train_images=2000"]
    submitted = subprocess.run(["hpc-train", "submit", *options], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert submitted.returncode == 0, submitted.stderr
    job = Job(submitted.stdout.splitlines()[0], tmp_path, env)
    # (issue 45) What Slurm received through submitit asks the resources of the script a dry run (and render) shows.
    received = subprocess.run(["scontrol", "write", "batch_script", job.id, "-"], env=env, capture_output=True,
                              text=True)
    shown = subprocess.run(["hpc-train", "submit", *options, "--dry-run"], cwd=tmp_path, env=env, capture_output=True,
                           text=True)
    assert received.returncode == 0 and shown.returncode == 0, received.stderr + shown.stderr
    assert differences(asked(shown.stdout), asked(received.stdout)) == {} and "srun" not in received.stdout
    folder = tmp_path / "runs" / f"{name}-{job.id}"
    # The job's own log (runs/joblog.py), then each rank's (logs/rank-N.out: every job's layout).
    logs = "".join(path.read_text() for path in [job_log_path(folder), *sorted(folder.glob("logs/*"))] if path.exists())
    assert job.wait() == ("COMPLETED", "0:0"), logs[-3000:]
    logs = "".join(path.read_text() for path in [job_log_path(folder), *sorted(folder.glob("logs/*"))] if path.exists())
    assert sorted(path.name for path in folder.glob("logs/*")) == [f"rank-{rank}.out" for rank in range(4)]
    roles = sorted(re.findall(r"rank (\d) is worker (\d) at (node\d):\d+", logs))
    assert roles == [("0", "0", "node1"), ("1", "1", "node1"), ("2", "2", "node2"), ("3", "3", "node2")]
    assert json.loads((folder / "metrics.json").read_text())["world_size"] == 4
    assert not list(tmp_path.rglob("PWNED"))
    status = subprocess.run(["hpc-train", "status", job.id], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert "completed" in status.stdout and "no Slurm accounting here" in status.stdout
    # (issue 46, 5) the job's own log, its start line, in its one place (runs/NAME-JOBID/slurm-NAME-JOBID.out),
    # submitit's job too: none of submitit's own JOBID_0_log.out and .err.
    assert job_log_path(folder).is_file() and not list(folder.glob("*_log.*")), sorted(folder.iterdir())
    own = subprocess.run(["hpc-train", "logs", job.id, "--job"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert own.returncode == 0 and f"hpc-train: job {job.id} on node[1-2], 4 tasks" in own.stdout, own.stdout


def kill_rank(job: Job, rank: int, signum: int = 9) -> float:
    """SIGKILL (or `signum`) the Python process of one rank of a running job, as a crash would; when it happened.
    A rank not found fails the test, and never leaves a long job behind to slow the rest of the suite."""
    pid = rank_pid(job.id, rank, lambda comm, cmdline: comm.startswith(("python", "hpc-train")),
                   job.env.get("SLURM_CONF"))
    if pid is None:
        subprocess.run(["scancel", job.id], env=job.env)
        pytest.fail(f"rank {rank} of job {job.id} not found:\n{job.log()[-2000:]}")
    os.kill(pid, signum)
    return time.monotonic()


def test_killing_one_worker_without_retries_fails_the_whole_job_quickly_and_names_it(cluster: LocalCluster,
                                                                                   tmp_path: Path) -> None:
    job = submit(cluster, tmp_path, "mnist_2node.sh", "--set", "epochs=50", "--set", "max_retries=0")
    job.wait_for_log("epoch 1/50")  # training has begun on both
    killed = kill_rank(job, 1)
    state, _ = job.wait()
    assert state == "FAILED" and time.monotonic() - killed < 60, job.log()[-2000:]
    assert re.search(r"task 1: Killed", job.log()), job.log()[-2000:]
    assert re.search(r"attempt 1 of 1 failed: node\d+ task 1: Killed; not retried: max_retries is 0", job.log())


def rank_node(job: Job, rank: int) -> str:
    return job.task_lines()[rank].split(" at ")[1].split(":")[0]


def assert_healed(job: Job, uninterrupted: Job, failures: list[tuple[str, str, str]]) -> None:
    """Completed after its failures, as if never stopped, its history saying why each (action, cause, node blamed),
    and never on a blamed node again."""
    assert_resumed_as_if_never_stopped(job, uninterrupted)
    entries = job.run_state()["attempts"]
    assert [(entry["action"], entry["cause"], entry["excluded"]) for entry in entries] == [
        (action, cause, [blamed]) for action, cause, blamed in failures], entries
    assert all(entry["seconds_lost"] > 0 for entry in entries) and job.metrics()["totals"]["failures"] == len(failures)
    # The ledger keeps every attempt; a failed one's `lost` is its steps redone: from the checkpoint the retry
    # resumed from to the attempt's own end, no less (what it trained after) and no more (a node lost: Slurm's SIGTERM
    # may reach the chief, which saves first, and that save is kept); the gap until the retry is `requeued`.
    node_lost = failures[0][0] == "requeued by Slurm"
    ledger = assert_ledger_adds_up(job, attempts=len(failures) + 1, or_more=node_lost)
    rows = ledger["attempts"]
    if node_lost:  # (one failure; Slurm may start an attempt more, which trains nothing)
        failed, *between, resumed = rows
        assert all(attempt["compute"] == 0 for attempt in between), ledger
        pairs = [(entries[0], failed)]
    else:
        pairs, resumed = list(zip(entries, rows[:-1])), rows[-1]
    for entry, failed in pairs:
        assert_lost_is_what_was_redone(entry, failed, written_after=node_lost, ledger=ledger)
    assert resumed["lost"] == 0 and ledger["requeued"] > 0, ledger
    last_attempt = job.log().rsplit("hpc-train: job ", 1)[1]
    blamed = [node for _, _, node in failures]
    assert re.search(r"rank 1 is worker 1 at node\d+", last_attempt) and not any(
        f" at {node}:" in last_attempt for node in blamed), last_attempt[-3000:]
    shown = subprocess.run(["scontrol", "show", "job", job.id], env=job.env, capture_output=True, text=True).stdout
    excluded = re.search(r"ExcNodeList=(\S+)", shown)
    assert excluded and set(expand_nodes(excluded.group(1))) == set(blamed), shown


def assert_lost_is_what_was_redone(entry: dict, failed: dict, written_after: bool, ledger: dict) -> None:
    """A failed attempt's `lost`: the steps after its last save. The failure's entry is written by the failed
    attempt's epilogue (retried), or by the next attempt's prologue after the queue (a node lost: its body was ended
    with the node's step, `written_after`), so then it cannot bound the failed attempt's end."""
    failed_end = failed["started"] + failed["wall"]
    assert entry["time"] >= failed_end if written_after else entry["time"] <= failed_end + 0.01, (ledger, entry)
    # Saved in the failed attempt: before its recorded end, or, for a node lost, before the next attempt wrote the
    # failure's entry (the chief may save at Slurm's SIGTERM, after the body recorded the attempt's end).
    saved_by = entry["time"] if written_after else failed_end
    assert failed["started"] < entry["checkpoint_time"] <= saved_by, (ledger, entry)
    redone = max(0.0, failed_end - entry["checkpoint_time"])
    # The ledger's checkpoint time is when the save ended, a moment after its index file (the entry's) was written;
    # a node lost: the save the chief made at SIGTERM may be the ledger's or not, so no more than `redone` is asked.
    assert redone - 2.0 <= failed["lost"], (ledger, entry)
    assert written_after or failed["lost"] <= redone + 0.01, (ledger, entry)


def test_a_killed_then_a_frozen_worker_are_retried_on_other_nodes_and_the_job_ends_as_if_never_stopped(
        cluster: LocalCluster, tmp_path: Path, uninterrupted: Job) -> None:
    # One job, two failures: worker 1 killed in the first attempt, frozen (SIGSTOP: its peer's collective times
    # out) in the second; each retry runs without the node blamed, and the four nodes leave two for the third.
    job = submit(cluster, tmp_path, "mnist_2node.sh", *TWO_NODE_SETTINGS, *OFTEN, extra_env=node_tmp(tmp_path))
    job.wait_for_log(f"epoch 1/{EPOCHS}")
    saved = job.wait_for_a_checkpoint()  # what the retry resumes from
    killed_on = rank_node(job, 1)
    # The rank's own TMPDIR, named by the job, its attempt and the rank, holds TensorFlow's autograph files.
    [own] = Path(job.env["TMPDIR"]).glob(f"hpc-train-{job.id}-0-*-1")
    assert list(own.glob("__autograph_generated_file*.py")), left_in_tmp(job)
    kill_rank(job, 1)
    job.wait_for_log("hpc-train: attempt 2 of 4: retried after")
    [resumed_at] = [int(step.replace(",", "")) for step in
                    re.findall(r"attempt 2 of 4: retried after .*; resumed at step ([\d,]+)", job.log())]
    assert resumed_at >= saved
    job.wait_for_a_checkpoint(after=resumed_at)  # the second attempt's own save, for its retry to resume from
    frozen_on = rank_node(job, 1)
    kill_rank(job, 1, signal.SIGSTOP)
    assert_healed(job, uninterrupted, [("retried", f"{killed_on} task 1: Killed", killed_on),
                                       ("retried", f"worker 1 stopped answering (on {frozen_on})", frozen_on)])
    assert left_in_tmp(job) == []  # the killed rank's too, though it never reached its own end (issue 46)
    assert re.search(rf"hpc-train: attempt 2 of 4: retried after .*; {killed_on} excluded; resumed at step \d+",
                     job.log())
    assert re.search(rf"hpc-train: attempt 3 of 4: retried after .*; {frozen_on} excluded; resumed at step \d+",
                     job.log())


def test_a_node_lost_under_a_job_costs_a_restart_elsewhere(cluster: LocalCluster, tmp_path: Path,
                                                           uninterrupted: Job) -> None:
    job = submit(cluster, tmp_path, "mnist_2node.sh", *TWO_NODE_SETTINGS, *OFTEN)
    job.wait_for_log(f"epoch 1/{EPOCHS}")
    job.wait_for_a_checkpoint()  # what the restart elsewhere resumes from
    node = rank_node(job, 1)
    env = control.slurm_env(cluster)
    subprocess.run(["scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=e2e-lost-node"], env=env, check=True)
    try:
        assert_healed(job, uninterrupted, [("requeued by Slurm", f"{node} down", node)])
    finally:
        subprocess.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], env=env, capture_output=True)


def test_a_parameter_server_job_is_retried_without_its_lost_ps_then_outlives_a_lost_worker(cluster: LocalCluster,
                                                                                           tmp_path: Path) -> None:
    # One job, two losses: its ps killed in the first attempt (the job cannot go on: retried on other nodes), a
    # worker killed in the second (the chief trains on with the other). The script's GPU line on: Slurm gives each
    # node 2 GPUs (GRES); the workers split theirs, chief and ps get none.
    job = submit(cluster, tmp_path, with_gpu_lines_on("mnist_ps.sh", tmp_path), "--set", "epochs=4", *OFTEN)
    job.wait_for_log("epoch 1/4")
    lines = job.task_lines()
    assert re.fullmatch(r"rank 0 is chief 0 at node\d+:\d+, GPUs: none", lines[0])
    assert re.fullmatch(r"rank 1 is ps 0 at node\d+:\d+, GPUs: none", lines[1])
    assert {lines[2].split("GPUs: ")[1], lines[3].split("GPUs: ")[1]} == {"0", "1"}  # one each, disjoint
    # The workers compute: each says once that TensorFlow cannot use its GPU; chief and ps have none to say it of.
    notes = re.findall(r"\[(\w+ \d)\] bound to GPU [01] by Slurm; TensorFlow sees no GPU: CPU", job.log())
    assert sorted(notes) == ["worker 0", "worker 1"], job.log()[-3000:]
    job.wait_for_a_checkpoint()  # what the retry resumes from
    kill_rank(job, 1)  # ps 0
    job.wait_for_log_after("(restart 1)", "hpc-train: epoch ")  # the retry trains: it resumed in epoch 1 or 2
    assert "hpc-train: epoch 4/4" not in job.log().partition("(restart 1)")[2]  # (epochs left to lose a worker in)
    kill_rank(job, 3)  # worker 1, this time
    state, _ = job.wait()
    log = job.log()
    first, retry = log.split("(restart 1)", 1)
    assert re.search(r"task 1: Killed", first)
    # (Not always at the start of a line: TensorFlow's threads may leave theirs unfinished on the same stream.)
    assert re.search(r"hpc-train train: error: lost contact with ps 0 at node\d+:\d+ \(.*\); the job cannot go on "
                     r"without it: it is retried on other nodes", first), first[-3000:]
    # The cause is the first task end srun reports: the ps killed, or the chief's exit saying it lost the ps (srun
    # reports the two in either order).
    assert re.search(r"hpc-train: attempt 2 of 4: retried after (node\d+ task 1 was killed|ps 0 stopped answering "
                     r"\(on node\d+\)); node\d+ excluded", log), log[-3000:]
    assert re.search(r"task 3: Killed", retry) and "Worker /job:worker/replica:0/task:1 failed" in retry, retry[-3000:]
    # The chief trained on with worker 0 and finished: the job is completed, and its log says a task died.
    assert [epoch["epoch"] for epoch in job.metrics()["epochs"]] == [1, 2, 3, 4]
    assert job.run_state()["state"] == "finished" and job.metrics()["totals"]["final_val_accuracy"] >= 0.9
    assert state == "COMPLETED" and re.search(r"warning: a task of the step failed \(exit \d+\), but the chief "
                                              r"finished", retry), retry[-3000:]
    # The retry's other tasks leave once the chief has finished (the servers wait for it, then exit by themselves).
    for role in ("[ps 0]", "[worker 0]"):
        assert re.search(rf"{re.escape(role)} the chief at node\d+:\d+ has finished; exiting", retry), retry[-3000:]
