"""Node ranges on a real Slurm (`--nodes 2-4`, docs/jobs.md "Node ranges"): a job starts on the 2 nodes that are
free while another job holds the others; a job that loses a node goes on with the rest (never below MIN) in the
same allocation, the lost node given back to Slurm; a job requeued with a node fewer comes back smaller and resumes. Every size trains the same: one global batch of 240.

The job is rendered (`hpc-train render`) and submitted with sbatch, as a user of the cluster would.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hostlist import expand_hostlist

from hpc_train.localslurm import control
from hpc_train.localslurm.spec import LocalCluster
from hpc_train.runs.views import slurm_seconds
from hpc_train.slurm.client import fields
from tests.e2e.jobs import job_state, wait_for_end
from tests.e2e.test_trainer_jobs import Job, kill_rank, submit
from tests.mnist_data import shared_mnist

pytestmark = [pytest.mark.slurm_cluster, pytest.mark.tensorflow]
# 10 steps an epoch (2,400 images, a global batch of 240: 60 a replica on 4 nodes, 80 on 3, 120 on 2); a save at a
# step boundary every 3 s, and a boundary every 2 steps.
SMALL = ("--set", "train_images=2400", "--set", "validation_images=500", "--set", "batch_size=60", "--set",
         "checkpoint_minutes=0.05", "--set", "steps_per_execution=2")
# A command of your own: its rank, size, range and TF_CONFIG's workers.
SHOW = ("import json, os; print('RANK', os.environ['SLURM_PROCID'], os.environ['HPC_TRAIN_NODES'], "
        "os.environ['HPC_TRAIN_NODE_RANGE'], len(json.loads(os.environ['TF_CONFIG'])['cluster']['worker']))")


def rendered(workdir: Path, epochs: int) -> Path:
    script = workdir / "range.sbatch"
    subprocess.run([sys.executable, "-m", "hpc_train", "render", "--nodes", "2-4", "--name", "range", "-o",
                    str(script), "--set", f"epochs={epochs}", "--set", f"data_dir={shared_mnist()}", *SMALL],
                   cwd=workdir, check=True, capture_output=True, text=True)
    return script


def chief_log(job: Job) -> str:
    if not job.started():
        return ""
    path = job.run_dir() / "logs" / "rank-0.out"
    return path.read_text() if path.exists() else ""


def rank_node(job: Job, rank: int) -> str:
    """The node a rank of the job's newest attempt runs on, from its own log (a rendered job's ranks log apart)."""
    path = job.run_dir() / "logs" / f"rank-{rank}.out"
    hosts = re.findall(rf"rank {rank} is \w+ \d+ at (\w+):\d+", path.read_text() if path.exists() else "")
    assert hosts, f"rank {rank} of job {job.id} said no node:\n{job.log()[-2000:]}"
    return hosts[-1]


def wait_until(job: Job, done, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline or job.state()[0] in ("COMPLETED", "FAILED", "CANCELLED"):
            subprocess.run(["scancel", job.id], env=job.env)
            pytest.fail(f"job {job.id}: {what} never came:\n{job.log()[-3000:]}")
        time.sleep(0.5)


def assert_every_epoch(job: Job, epochs: int) -> None:
    metrics = job.metrics()
    assert [epoch["epoch"] for epoch in metrics["epochs"]] == list(range(1, epochs + 1)), metrics["epochs"]
    assert metrics["global_batch"] == 240 and metrics["steps_per_epoch"] == 10


def test_a_range_starts_on_the_two_free_nodes_while_another_job_holds_the_others(cluster: LocalCluster,
                                                                                 tmp_path: Path) -> None:
    env = control.slurm_env(cluster)
    holder = subprocess.run(["sbatch", "--parsable", "--exclusive", "-N", "2", "-w", "node[1-2]", "-o", "/dev/null",
                             "--wrap", "sleep 600"], env=env, capture_output=True, text=True, check=True).stdout.strip()
    try:
        deadline = time.monotonic() + 60
        while job_state(holder, env)[0] != "RUNNING":
            assert time.monotonic() < deadline, f"the holding job {holder} never ran"
            time.sleep(0.5)
        job = submit(cluster, tmp_path, rendered(tmp_path, 2))
        # And a command of your own, through submit (submitit): it gets the range and its size beside TF_CONFIG.
        command = subprocess.run([sys.executable, "-m", "hpc_train", "submit", "--nodes", "2-4", "--name", "cmd", "--",
                                  sys.executable, "-c", SHOW], cwd=tmp_path, env=job.env, capture_output=True,
                                 text=True, timeout=180)
        assert command.returncode == 0, command.stderr
        assert job.wait() == ("COMPLETED", "0:0"), job.log()[-3000:]
        command_id = command.stdout.splitlines()[0]
        assert wait_for_end(command_id, env, lambda: "") == ("COMPLETED", "0:0")
    finally:
        subprocess.run(["scancel", holder], env=env)
    seen = [re.search(r"^RANK (.*)$", path.read_text(), re.M).group(1)
            for path in sorted((tmp_path / "runs" / f"cmd-{command_id}" / "logs").glob("rank-*.out"))]
    assert seen == ["0 2 2-4 2", "1 2 2-4 2"], seen  # rank, HPC_TRAIN_NODES, HPC_TRAIN_NODE_RANGE, TF_CONFIG's workers
    log = job.log()
    assert re.search(r"hpc-train: job \d+ on node\[9-10\], 2 tasks, on 2 of 2-4 nodes; ", log), log[-3000:]
    assert "hpc-train: attempt 1 on 2 of 2-4 nodes: the partition's other nodes were busy with other jobs" in log
    assert "batch 120 per replica, 240 global; 10 steps per epoch" in chief_log(job)
    assert_every_epoch(job, 2)
    assert {epoch["nodes"] for epoch in job.metrics()["epochs"]} == {"on 2 of 2-4 nodes"}


def test_a_lost_node_shrinks_the_job_and_a_requeue_with_a_node_fewer_brings_it_back_smaller(
        cluster: LocalCluster, tmp_path: Path) -> None:
    epochs = 10
    job = submit(cluster, tmp_path, rendered(tmp_path, epochs))
    wait_until(job, lambda: "batch 60 per replica, 240 global" in chief_log(job), "the start on 4 nodes")
    first = job.wait_for_a_checkpoint()  # what the retry resumes from
    lost = rank_node(job, 1)
    kill_rank(job, 1)  # a crash: its node is excluded, and the next attempt runs on the 3 left (MIN is 2)
    wait_until(job, lambda: "on 3 of 2-4 nodes" in job.log() and "batch 80 per replica" in chief_log(job),
               "the attempt on 3 nodes")
    # In the same allocation (no requeue: Slurm restarted nothing), the lost node given back to Slurm at once.
    shown = fields(subprocess.run(["scontrol", "show", "job", "-o", job.id], env=job.env, capture_output=True,
                                  text=True, check=True).stdout)
    assert shown["NumNodes"] == "3" and lost not in expand_hostlist(shown["NodeList"]), shown
    assert shown["Restarts"] == "0", shown
    assert re.search(rf"^hpc-train: released {lost} at \d\d:\d\d:\d\d, excluded after attempt 1 failed; attempt 2 "
                     r"goes on in this allocation with 3 of 2-4 nodes$", job.log(), re.M), job.log()[-3000:]
    wait_until(job, lambda: max(job.checkpoint_steps()) > first + 2, "a checkpoint of the attempt on 3 nodes")
    # The time-limit warning: the job requeues itself, and keeps the node it gave back out of its next allocation
    # (the job body, at Slurm's SIGTERM); one more node set aside by hand meanwhile: it comes back on 2.
    others = sorted({rank_node(job, rank) for rank in range(3)} - {lost})
    subprocess.run(["scancel", "--batch", "--signal=USR1", job.id], env=job.env, check=True)
    wait_until(job, lambda: lost in expand_hostlist(fields(subprocess.run(
        ["scontrol", "show", "job", "-o", job.id], env=job.env, capture_output=True, text=True).stdout).get(
        "ExcNodeList", "").replace("(null)", "")), f"{lost} excluded by the job itself")
    # Slurm may refuse the update while the requeue is still ending the attempt it shrank ("Requested node
    # configuration is not available": its 3 nodes, not yet its 2-4 again); the requeued job waits out cred_expire.
    deadline = time.monotonic() + 30
    while (update := subprocess.run(["scontrol", "update", f"JobId={job.id}", f"ExcNodeList={lost},{others[0]}"],
                                    env=job.env, capture_output=True, text=True)).returncode != 0:
        assert time.monotonic() < deadline, update.stderr
        time.sleep(0.2)
    assert job.wait() == ("COMPLETED", "0:0"), job.log()[-3000:]
    log = job.log()
    sizes = re.findall(r"hpc-train: job \d+(?: \(restart \d\))? on \S+, \d tasks, (on \d of 2-4 nodes);", log)
    assert sizes == ["on 4 of 2-4 nodes", "on 3 of 2-4 nodes", "on 2 of 2-4 nodes"], log[-4000:]
    assert re.search(rf"hpc-train: attempt 2 of 4: retried after .*; {lost} excluded; resumed at step \d+", log), log
    assert f"attempt 2 on 3 of 2-4 nodes: {lost} excluded; " in log, log[-3000:]
    excluded = ", ".join(sorted([lost, others[0]]))
    assert f"attempt 3 on 2 of 2-4 nodes: {excluded} excluded; " in log, log[-3000:]
    ranks = chief_log(job)
    assert all(f"batch {size} per replica, 240 global; 10 steps per epoch" in ranks for size in (60, 80, 120))
    assert_every_epoch(job, epochs)
    assert "resuming with another input layout" not in log + ranks  # a change of size is the same training
    status = subprocess.run([sys.executable, "-m", "hpc_train", "status", job.id], cwd=tmp_path, env=job.env,
                            capture_output=True, text=True).stdout
    assert ("sizes:   attempt 1 on 4 of 2-4 nodes; attempt 2 on 3 of 2-4 nodes; attempt 3 on 2 of 2-4 nodes"
            in status), status
    assert re.search(rf"history: attempt 2 of \d: retried after .*; released {lost} at \d\d:\d\d:\d\d, in its allocation",
                     status), status
    # Every attempt kept (issue 46): the retried one's end, the requeued one's (its body ended with it: closed by
    # the next), the last; each its nodes and tasks; `elapsed` the job's, not its last attempt's.
    ended = job.run_state()["ended"]
    assert [(entry["attempt"], entry.get("tasks")) for entry in ended] == [(1, "4"), (2, "3"), (3, "2")], ended
    assert all(entry["started"] < entry["ended"] <= later["started"] for entry, later in zip(ended, ended[1:]))
    # The ledger holds attempt 1's 4 nodes until the node went back, attempt 2's 3 from then on (issue 48).
    [retried] = [entry for entry in job.run_state()["attempts"] if entry.get("in_allocation")]
    assert retried["released"] == [lost] and retried["released_at"] <= ended[0]["ended"] <= ended[1]["started"]
    rows = json.loads((job.run_dir() / "ledger.json").read_text())["attempts"]
    assert [(row["attempt"], row["nodes"]) for row in rows] == [(1, 4), (2, 3), (3, 2)], rows
    assert re.search(r"^  nodes:   \S+ \(2 tasks, multiworker\)", status, re.M), status
    elapsed = re.search(r"^  elapsed: (\S+) \(3 attempts\)$", status, re.M)
    assert elapsed and slurm_seconds(elapsed.group(1)) >= sum(entry["ended"] - entry["started"]
                                                              for entry in ended[:2]), status
