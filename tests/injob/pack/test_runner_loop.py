"""The pack's loop with an srun on PATH that runs its step here (tests/fake_slurm.py): trials started on free
shares, a failure retried, a cancel, a hang ended by the trial's own watchdog; no cluster."""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from pathlib import Path

import pytest

from hpc_train.injob import watchdog
from hpc_train.injob.pack import runner
from hpc_train.runs.packed import PLAN, read_pack_state, request_cancel
from tests.fake_slurm import FakeSlurm, Reply, without_slurm

SCRIPT = """\
import os, pathlib, sys, time
index = int(os.environ["HPC_TRAIN_TRIAL"])
once = pathlib.Path(os.environ["HPC_TRAIN_RUN_DIR"]) / "failed-once"
if index == 1 and not once.exists():
    once.write_text("x")
    sys.exit(4)
time.sleep(30 if index == 2 else 0.2)
print("ran", index, os.environ["HPC_TRAIN_SWEEP_SEED"])
"""


# The fake srun runs its step here, with the node it was given as NODE; sinfo says every node is well.
SRUN = ('while [[ "$1" == --* ]]; do case "$1" in --nodelist=*) export NODE="${1#--nodelist=}";; esac; shift; done\n'
        'exec "$@"\n')
SINFO = "node1 alloc\nnode2 alloc\n"


@pytest.fixture(params=["said by srun", "down in sinfo", "dropped from the job"])
def node1_lost(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """node1 lost, as the step's srun says it at once, as sinfo says it (down, not responding), or as the job says
    it (under --no-kill Slurm takes a failed node out of the job's NodeList, while the node itself may come back)."""
    from hpc_train.slurm.client import SlurmClient

    if request.param == "said by srun":
        monkeypatch.setenv("SAY_NODE_FAILURE", "1")
    elif request.param == "down in sinfo":
        monkeypatch.setattr(SlurmClient, "node_states", lambda self, partition=None: {"node1": "down*",
                                                                                      "node2": "alloc"})
    else:
        monkeypatch.setattr(SlurmClient, "show_job", lambda self, job_id, timeout=30: {"NodeList": "node2"})


@pytest.fixture
def pack_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    fake = FakeSlurm(tmp_path / ".fake-slurm", {"srun": Reply(shell=SRUN), "sinfo": Reply(SINFO)})
    environ = fake.install(tmp_path / "bin")
    for name, value in {**without_slurm(environ), "SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "node[1-2]"}.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "trial.py").write_text(SCRIPT)
    # The ranks' command itself is tested elsewhere (test_runner.py): here each trial runs the script bare.
    monkeypatch.setattr(runner, "rank_command",
                        lambda plan, folder, values: [sys.executable, str(tmp_path / "trial.py")])
    run_dir = tmp_path / "runs" / "sw-7"
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text("epochs: 1\n")
    (run_dir / PLAN).write_text(json.dumps({
        "name": "sw", "trials": [{"seed": seed} for seed in (10, 11, 12, 13)], "search": None, "command": ["x"],
        "strategy": "multiworker", "num_ps": 1, "max_requeues": 5, "keras": "auto", "command_signal": "USR1",
        "max_retries": 1, "retry_exit_codes": [4], "max_parallel": None, "hang_minutes": None, "pack": {},
        "share": {"nodes": 1, "gpus": 0, "tasks": 1, "cpus": None, "per_node": 1}}))
    return run_dir


def test_the_loop_retries_a_failure_cancels_on_request_and_ends_a_hang(pack_dir: Path,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(runner, "POLL_SECONDS", 0.1)
    monkeypatch.setattr(watchdog, "POLL_SECONDS", 0.2)
    monkeypatch.setattr(watchdog, "STACKS_WAIT_SECONDS", 0.1)
    hung = pack_dir.parent / "sw-7_2"
    # A hang: trial 2 alone is seen to make no progress (the threshold's own rule is watchdog.py's, tested there).
    monkeypatch.setattr(watchdog.Watchdog, "start", lambda self: (
        threading.Thread(target=self._act, args=(60.0,), daemon=True).start() if self.watch.run_dir == hung
        else None) or self)
    (pack_dir.parent / "sw-7_3").mkdir()
    request_cancel(pack_dir.parent / "sw-7_3")  # trial 3 waits for a share: it never starts, the others go on
    started = time.monotonic()
    assert runner.main(["--run-dir", str(pack_dir)]) == 1  # one trial failed for good: the job says so
    said = capsys.readouterr().err
    state = read_pack_state(pack_dir)
    assert [trial["state"] for trial in state["trials"]] == ["done", "done", "failed", "cancelled"], said
    assert "trial 1: crashed (exit 4); retried on another share where one is free (attempt 2 of at most 2)" in said
    assert said.count("trial sw-7_2: hung: no progress on any rank") == 2, said
    assert [run["how"] for run in state["trials"][1]["runs"]] == ["crashed", "done"]
    assert [run["how"] for run in state["trials"][2]["runs"]] == ["crashed", "crashed"]  # hung, retried, hung again
    assert state["trials"][3]["runs"] == []
    assert json.loads((pack_dir.parent / "sw-7_0" / "job.json").read_text())["job_id"] == "7_0"
    sweep = json.loads((pack_dir / "job.json").read_text())  # started as render's script is: its record made here
    assert (sweep["job_id"], sweep["sweep"], len(sweep["elements"]), sweep["pack"]) == ("7", "7", 4, {})
    assert time.monotonic() - started < 20  # the hung trial's 30 s sleep was ended


def test_each_packed_trial_is_a_child_mlflow_run_of_the_sweeps(pack_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("mlflow")
    monkeypatch.setattr(runner, "POLL_SECONDS", 0.1)
    store = f"sqlite:///{pack_dir.parent.parent / 'mlflow.db'}"
    plan = json.loads((pack_dir / PLAN).read_text())
    (pack_dir / PLAN).write_text(json.dumps({**plan, "trials": plan["trials"][:2], "track": "mlflow",
                                             "tracking_uri": store, "experiment": "packed"}))
    assert runner.main(["--run-dir", str(pack_dir)]) == 0, capsys.readouterr().err
    import mlflow

    client = mlflow.tracking.MlflowClient(store)
    runs = {json.loads((pack_dir.parent / f"sw-7_{index}" / "tracking.json").read_text())["run_id"]: index
            for index in range(2)}
    found = [client.get_run(run_id) for run_id in runs]
    assert [run.info.status for run in found] == ["FINISHED", "FINISHED"], capsys.readouterr().err
    parents = {run.data.tags.get("mlflow.parentRunId") for run in found}
    assert len(parents) == 1 and None not in parents  # both children of the sweep's one run


LOSING = """\
import os, pathlib, sys, time
if os.environ["NODE"] == "node1":  # its node is lost under it (node1_lost): its srun never ends by itself
    if os.environ.get("SAY_NODE_FAILURE"):
        print("srun: error: Node failure on node1", flush=True)  # (the fake srun is this process)
    time.sleep(30)
time.sleep(0.2)
print("ran", os.environ["HPC_TRAIN_TRIAL"], "on", os.environ["NODE"])
"""


def test_a_lost_node_restarts_its_trial_on_the_share_left_without_spending_a_retry(
        pack_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], node1_lost: None) -> None:
    monkeypatch.setattr(runner, "POLL_SECONDS", 0.1)
    monkeypatch.setattr(runner, "LOST_CHECK_SECONDS", 0.5)
    started = time.monotonic()
    (pack_dir.parent.parent / "trial.py").write_text(LOSING)
    plan = json.loads((pack_dir / PLAN).read_text())
    (pack_dir / PLAN).write_text(json.dumps({**plan, "trials": plan["trials"][:3], "max_retries": 0}))
    assert runner.main(["--run-dir", str(pack_dir)]) == 0, capsys.readouterr().err
    said = capsys.readouterr().err
    state = read_pack_state(pack_dir)
    assert [trial["state"] for trial in state["trials"]] == ["done", "done", "done"], said
    assert state["lost"] == ["node1"]
    assert "node(s) node1 lost: the trials on them restart on the 1 share(s) left; no trial starts there again" in said
    assert "trial 0: ended with its node (exit 143); restarts on another share, no retry spent" in said
    assert time.monotonic() - started < 15  # its srun on the lost node was ended, not waited for
    first = state["trials"][0]["runs"]
    assert [(run["nodes"], run["how"]) for run in first] == [(["node1"], "node lost"), (["node2"], "done")]
    assert all(run["nodes"] == ["node2"] for trial in state["trials"][1:] for run in trial["runs"])


def test_a_pack_that_lost_every_node_ends_saying_so_instead_of_waiting(
        pack_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], node1_lost: None) -> None:
    monkeypatch.setattr(runner, "POLL_SECONDS", 0.1)
    monkeypatch.setattr(runner, "LOST_CHECK_SECONDS", 0.5)
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node1")
    (pack_dir.parent.parent / "trial.py").write_text(LOSING)
    assert runner.main(["--run-dir", str(pack_dir)]) == 1
    said = capsys.readouterr().err
    assert "no share is left to run the waiting trials on: every node of the job was lost" in said
    assert "pack 7 ended: 4 waiting" in said


# Trial 0 (node1, the batch host) waits until the pack says node2 went back (or could not), then crashes once: its
# retry starts after the release, on node1, and says which nodes its step was told the job holds.
RELEASING = """\
import json, os, pathlib, sys, time
index, folder = int(os.environ["HPC_TRAIN_TRIAL"]), pathlib.Path(os.environ["HPC_TRAIN_RUN_DIR"])
if index == 0:
    state = folder.parent / "sw-7" / "pack-state.json"
    while not any(json.loads(state.read_text()).get(key) for key in ("released", "refused")):
        time.sleep(0.05)
    once = folder / "crashed-once"
    if not once.exists():
        once.write_text("x")
        sys.exit(137)
print("ran", index, "on", os.environ["NODE"], "in", os.environ["SLURM_JOB_NODELIST"],
      os.environ.get("SLURM_NTASKS", "-"))
"""
# scontrol update as Slurm 22.05 answers a shrink: it writes slurm_job_7_resize.sh where it runs.
RESIZE = ('printf \'export SLURM_NODELIST="node1"\\nexport SLURM_JOB_NODELIST="node1"\\nexport SLURM_NNODES=1\\n'
          'export SLURM_JOB_NUM_NODES=1\\nexport SLURM_JOB_CPUS_PER_NODE="4"\\nunset SLURM_NPROCS\\n'
          'unset SLURM_NTASKS\\nunset SLURM_TASKS_PER_NODE\\n\' > slurm_job_7_resize.sh\n')


@pytest.mark.parametrize("refused", [False, True], ids=["released", "refused"])
def test_a_node_the_pack_will_not_use_again_goes_back_and_later_steps_see_the_job_shrunk(
        pack_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], refused: bool) -> None:
    monkeypatch.setattr(runner, "POLL_SECONDS", 0.1)
    monkeypatch.setenv("SLURM_NTASKS", "2")
    fake = FakeSlurm.at(pack_dir.parent.parent / ".fake-slurm")
    fake.on("scontrol show", Reply("JobId=7 JobState=RUNNING NodeList=node[1-2]\n"))
    fake.on("scontrol update", Reply(stderr="scontrol: error: Invalid node name specified", code=1) if refused
            else Reply(shell=RESIZE))
    fake.install(pack_dir.parent.parent / "bin")
    (pack_dir.parent.parent / "trial.py").write_text(RELEASING)
    plan = json.loads((pack_dir / PLAN).read_text())
    (pack_dir / PLAN).write_text(json.dumps({**plan, "trials": plan["trials"][:3], "retry_exit_codes": []}))
    assert runner.main(["--run-dir", str(pack_dir)]) == 0, capsys.readouterr().err  # never a failed job
    said = capsys.readouterr().err
    state = read_pack_state(pack_dir)
    assert [trial["state"] for trial in state["trials"]] == ["done", "done", "done"], said
    assert "scontrol update JobId=7 NodeList=node1" in fake.lines("scontrol")
    assert fake.lines("scontrol").count("scontrol update JobId=7 NodeList=node1") == 1  # asked once, never again
    if refused:
        assert ("could not give node2 back to Slurm (scontrol: error: Invalid node name specified); the pack holds "
                "it to its end") in said
        assert state["released"] == [] and state["refused"] == ["node2"]
        assert [run["nodes"] for run in state["trials"][0]["runs"]] == [["node1"], ["node2"]]  # still held: used
        assert "ran 0 on node2 in node[1-2] 2" in said, said
        return
    line = next(line for line in said.splitlines() if "released node2 at" in line)
    assert re.search(r"released node2 at \d\d:\d\d:\d\d, 2 trials done there$", line), line
    assert state["released"][0]["node"] == "node2" and state["released"][0]["done"] == 2
    assert state["refused"] == []
    assert [run["nodes"] for run in state["trials"][0]["runs"]] == [["node1"], ["node1"]]  # the batch host, kept
    assert "ran 0 on node1 in node1 -" in said, said  # the resize's variables: node1 alone, SLURM_NTASKS unset

