"""A user's own command through `hpc-train submit -- COMMAND` on a real Slurm.

Every task runs it under the bootstrap; status, logs and list follow it; its
exit is the job's; a task killed with -9 fails the job within a minute; and
Slurm's warning (submitit's USR2) reaches it as USR1, so that a command that
saves and exits 75 is requeued and runs again.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpc_train.localslurm.spec import LocalCluster
from tests.e2e.jobs import FINAL_STATES, rank_pid
from tests.e2e.test_task_modules import SubmittedJob, submit

pytestmark = pytest.mark.slurm_cluster
PRINT_TF_CONFIG = "import json, os; print('TF_CONFIG', os.environ['TF_CONFIG']); print('RUN_DIR', os.environ['HPC_TRAIN_RUN_DIR'])"
# Sleeps until warned; then exits 75 (saved: go on later) on the first run and 0 once requeued.
WARNED = """
import os, signal, sys, time
signal.signal(signal.SIGUSR1, lambda *_: sys.exit(75 if os.environ.get("SLURM_RESTART_COUNT", "0") == "0" else 0))
print("ready", flush=True)
if os.environ.get("SLURM_RESTART_COUNT", "0") != "0":
    print("resumed", flush=True)
    sys.exit(0)
time.sleep(300)
"""


def hpc_train(job: SubmittedJob, *args: str) -> str:
    result = subprocess.run(["hpc-train", *args], cwd=job.folder.parent.parent, env=job.env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_every_task_runs_the_command_and_the_job_is_followed_like_any(cluster: LocalCluster, tmp_path: Path) -> None:
    job = submit(cluster, tmp_path, "mine", "--", sys.executable, "-c", PRINT_TF_CONFIG)
    failing = submit(cluster, tmp_path, "fails", "--", "sh", "-c", "echo going; exit 3")
    assert job.wait() == ("COMPLETED", "0:0"), job.log(0, "err")
    # The failing task's code is in the log; Slurm's job exit code is the highest of the tasks', which is 3
    # when every task failed alike, or 143 when srun ended a slower one first (--kill-on-bad-exit).
    state, code = failing.wait()
    assert state == "FAILED" and code in ("3:0", "143:0"), (state, code, failing.log(0, "err"))
    assert re.search(r"task \d: Exited with exit code 3", failing.log(0, "err") + failing.log(1, "err"))
    seen = [json.loads(re.search(r"^TF_CONFIG (.*)$", job.log(rank), re.M).group(1)) for rank in (0, 1)]
    assert [config["task"] for config in seen] == [{"type": "worker", "index": 0}, {"type": "worker", "index": 1}]
    assert seen[0]["cluster"] == seen[1]["cluster"] and len(seen[0]["cluster"]["worker"]) == 2
    assert f"RUN_DIR {job.folder.resolve()}" in job.log(1)
    assert re.search(r"rank 1 is worker 1 at node\d+:\d+, GPUs: ", job.log(1, "err"))
    status = hpc_train(job, "status", job.id)
    assert "completed" in status and f"runs:    {sys.executable} -c " in status
    assert "TF_CONFIG" in hpc_train(job, "logs", job.id, "--rank", "1")
    listed = hpc_train(job, "list")
    assert re.search(rf"^{job.id} +mine +completed", listed, re.M) and re.search(rf"^{failing.id} +fails +failed",
                                                                                    listed, re.M)


def command_pid(job_id: str, rank: int, marker: str, conf: str | None = None) -> int | None:
    """The pid of rank `rank`'s command (not its supervisor, whose command line names it too), whose command line
    holds `marker`; `conf`: its cluster's SLURM_CONF."""
    return rank_pid(job_id, rank, lambda comm, cmdline: marker.encode() in cmdline and b"--supervise" not in cmdline,
                    conf)


def kill_command(job: SubmittedJob, rank: int, marker: str) -> float:
    """SIGKILL one rank's command (found by a marker in its command line); when it happened."""
    deadline = time.monotonic() + 120
    pid = None
    while pid is None and time.monotonic() < deadline and job.state()[0] not in FINAL_STATES:
        pid = command_pid(job.id, rank, marker, job.env.get("SLURM_CONF"))
        time.sleep(0.3)
    if pid is None:
        subprocess.run(["scancel", job.id], env=job.env)
        pytest.fail(f"rank {rank}'s command of job {job.id} not found:\n{job.log(rank, 'err')}")
    os.kill(pid, 9)
    return time.monotonic()


def test_a_command_killed_on_one_node_fails_the_job_within_a_minute_without_retries(cluster: LocalCluster,
                                                                                   tmp_path: Path) -> None:
    marker = "hpc-train-e2e-victim"
    job = submit(cluster, tmp_path, "victim", "--max-retries", "0", "--", sys.executable, "-c",
                 f"import time; time.sleep(300)  # {marker}")
    killed = kill_command(job, 1, marker)
    state, code = job.wait()
    assert state == "FAILED" and time.monotonic() - killed < 60, (state, code, job.log(0, "err"))
    assert "task 1: Exited with exit code 137" in job.log(0, "err") + job.log(1, "err")
    assert "not retried: max_retries is 0" in job.log(0, "err")


# Killed by a signal on its first run (as a crash would), done on the next.
ONCE_KILLED = "import os, signal; os.environ.get('SLURM_RESTART_COUNT', '0') == '0' and os.kill(os.getpid(), 9); print('done')"


def test_a_command_killed_by_a_signal_is_retried_on_other_nodes(cluster: LocalCluster, tmp_path: Path) -> None:
    job = submit(cluster, tmp_path, "crashy", "--", sys.executable, "-c", ONCE_KILLED)
    assert job.wait() == ("COMPLETED", "0:0"), job.log(0, "err")
    said = job.log(0, "err")
    assert re.search(r"attempt 2 of 4: retried after (node\d+) task \d was killed; \1(,node\d+)? excluded", said), said
    shown = subprocess.run(["scontrol", "show", "job", job.id], env=job.env, capture_output=True, text=True).stdout
    excluded = re.search(r"ExcNodeList=(\S+)", shown).group(1)
    first, second = re.findall(r"hpc-train: job \d+(?: \(restart \d\))? on (\S+)", said)[:2]
    assert excluded != "(null)" and not set(excluded.split(",")) & set(second.split(",")), (excluded, second)
    assert "done" in job.log(0) and "done" in job.log(1)
    history = json.loads((job.folder / "state.json").read_text())["attempts"]
    assert [(entry["action"], entry["kind"]) for entry in history] == [("retried", "died")]
    assert "history: attempt 2 of 4: retried after" in hpc_train(job, "status", job.id)
    assert re.search(rf"^{job.id}\s.*\(1 retry\)", hpc_train(job, "list"), re.M)


def test_a_command_that_keeps_failing_fails_once_its_retries_are_spent(cluster: LocalCluster, tmp_path: Path) -> None:
    job = submit(cluster, tmp_path, "doomed", "--max-retries", "1", "--", "sh", "-c", "kill -9 $$")
    state, _ = job.wait()
    said = job.log(0, "err")
    assert state == "FAILED", said
    assert re.search(r"attempt 2 of 2 failed: node\d+ task \d: Killed; retries exhausted \(1 of 1\)", said), said
    assert re.search(r"2 failures: attempt 1: node\d+ task \d: Killed; attempt 2: node\d+ task \d: Killed", said)


def test_a_warned_command_that_exits_75_is_requeued_and_runs_again(cluster: LocalCluster, tmp_path: Path) -> None:
    job = submit(cluster, tmp_path, "warned", "--", sys.executable, "-c", WARNED)
    deadline = time.monotonic() + 120
    while job.log(0).count("ready") < 1 or job.log(1).count("ready") < 1:
        assert time.monotonic() < deadline and job.state()[0] not in FINAL_STATES, job.log(0, "err")
        time.sleep(0.3)
    subprocess.run(["scancel", "--signal=USR2", job.id], env=job.env, check=True)  # what submitit asks Slurm for
    assert job.wait() == ("COMPLETED", "0:0"), job.log(0, "err")
    assert "resumed" in job.log(0) and "resumed" in job.log(1)
    assert re.search(r"requeueing job \d+ \(requeue 1 of at most 5\): it runs the command again", job.log(0, "err"))


@pytest.mark.tensorflow
def test_the_plain_example_script_is_warned_requeued_and_resumes(cluster: LocalCluster, tmp_path: Path) -> None:
    script = Path(__file__).resolve().parents[2] / "examples" / "seed_multiworker.py"
    job = submit(cluster, tmp_path, "seed", "--", sys.executable, str(script), "--epochs", "6")
    deadline = time.monotonic() + 180
    while "epoch 1/6" not in job.log(0):
        assert time.monotonic() < deadline and job.state()[0] not in FINAL_STATES, job.log(0, "err")[-3000:]
        time.sleep(0.3)
    subprocess.run(["scancel", "--signal=USR2", job.id], env=job.env, check=True)  # submitit's warning
    assert job.wait() == ("COMPLETED", "0:0"), job.log(0, "err")[-3000:]
    log = job.log(0)
    stopped = int(re.search(r"warned: saved after epoch (\d+); exiting 75", log).group(1))
    assert f"resuming after epoch {stopped}" in log and "done: final loss" in log
    assert re.search(r"requeueing job \d+ \(requeue 1 of at most 5\)", job.log(0, "err"))
    assert (job.folder / "checkpoints" / "ckpt-6.index").is_file()
