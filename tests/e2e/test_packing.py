"""A packed sweep on the local cluster with fake GPUs: 8 one-GPU command trials in ONE 2-node job, each its own
srun step on its own GPU; the node whose trials ended first given back to Slurm while the other's run on, but only
after the retry of its last trial's crash, which could run nowhere else, ran there; `cancel JOBID_I` ends one; a
requeued pack back at full size; a node lost under the job restarts only its trials elsewhere; `cancel JOBID` ends
them all."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpc_train.localslurm.spec import LocalCluster
from tests.e2e.test_task_modules import submit

pytestmark = pytest.mark.slurm_cluster
TRIAL = """\
import json, os, pathlib, sys, time
index, start, node = int(os.environ["HPC_TRAIN_TRIAL"]), time.time(), os.environ.get("SLURMD_NODENAME")
folder, run = pathlib.Path(sys.argv[1]), pathlib.Path(os.environ["HPC_TRAIN_RUN_DIR"])
pack_state = run.with_name(run.name.rpartition("_")[0]) / "pack-state.json"

def others_here():  # once every trial started: the others the pack runs on this node now (as pack-state.json says)
    while True:
        try:
            trials = json.loads(pack_state.read_text())["trials"]
        except (OSError, ValueError, KeyError):
            trials = []
        if trials and all(trial["state"] != "waiting" for trial in trials):
            return [trial["index"] for trial in trials if trial["state"] == "running" and trial["index"] != index
                    and trial["runs"][-1]["nodes"] == [node]]
        time.sleep(0.1)

if index < 4:  # the first wave: two trials a node
    time.sleep(2.5)
else:
    while not (folder / "batch-host").exists():  # (the test writes it once the job runs)
        time.sleep(0.1)
    if (folder / "batch-host").read_text().strip() == node:
        while not (folder / "go").exists() and time.time() - start < 120:  # the batch host's wait: the other
            time.sleep(0.2)                                                 # node's end first, and it goes back
    elif not any(other > index for other in others_here()):  # the other node's later trial: it waits until it
        while others_here():                                  # is the last one running there, then crashes once
            time.sleep(0.1)                                   # (its retry can only run there: the batch host's
        crashed = folder / f"crashed-{index}"                 # shares are held)
        if not crashed.exists():
            crashed.write_text("once")
            print("CRASH", node, flush=True)
            sys.exit(3)
        time.sleep(1)  # the retry
print("TRIAL", json.dumps({"index": index, "nap": int(sys.argv[2]), "node": node,
                           "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"), "start": start, "end": time.time()}))
"""


def trial_lines(folder: Path) -> list[dict]:
    log = folder / "logs" / "rank-0.out"
    text = log.read_text(errors="replace") if log.exists() else ""
    return [json.loads(line.partition("TRIAL ")[2]) for line in text.splitlines() if line.startswith("TRIAL ")]


def test_eight_one_gpu_trials_share_one_two_node_job_each_on_its_own_gpu(cluster: LocalCluster,
                                                                        tmp_path: Path) -> None:
    (tmp_path / "trial.py").write_text(TRIAL)
    job = submit(cluster, tmp_path, "pack", "--gpus-per-node", "2", "--pack", "--max-retries", "1", "--no-snapshot",
                 "--retry-exit-codes", "3", "--sweep", "nap=10,11,12,13,14,15,16,17", "--", sys.executable, "trial.py",
                 str(tmp_path), "{nap}")  # a key of the command's own (issue 46)
    runs = tmp_path / "runs"
    batch_log = runs / f"pack-{job.id}" / f"slurm-pack-{job.id}.out"

    def wait_until(done, what: str) -> None:
        deadline = time.monotonic() + 120
        while not done():
            assert time.monotonic() < deadline, f"{what} never came:\n{batch_log.read_text()[-3000:]}"
            time.sleep(0.3)

    def batch_host() -> str:
        return subprocess.run(["squeue", "-h", "-j", job.id, "-o", "%B"], env=job.env, capture_output=True,
                              text=True).stdout.strip()

    wait_until(lambda: batch_host() not in ("", "n/a"), "the job's start")
    host = batch_host()
    (tmp_path / "batch-host").write_text(host + "\n")
    # The other node's trials end while the batch host's last ones wait, its last one after a crash and a retry
    # there (the batch host's shares held): that node goes back to Slurm then, not before (issue 48).
    wait_until(lambda: batch_log.exists() and "released " in batch_log.read_text(), "the other node's release")
    shown = subprocess.run(["scontrol", "show", "job", "-o", job.id], env=job.env, capture_output=True,
                           text=True).stdout
    assert f" NodeList={host} " in shown and " NumNodes=1 " in shown and "JobState=RUNNING" in shown, shown
    state = json.loads((runs / f"pack-{job.id}" / "pack-state.json").read_text())
    waiting_here = [trial["index"] for trial in state["trials"] if trial["state"] == "running"]
    assert len(waiting_here) == 2 and all(trial["runs"][-1]["nodes"] == [host] for trial in state["trials"]
                                          if trial["state"] == "running"), state  # the batch host's trials run on
    cancelled = max(waiting_here)  # one ends alone, the rest go on
    cancel = subprocess.run(["hpc-train", "cancel", f"{job.id}_{cancelled}"], cwd=tmp_path, env=job.env,
                            capture_output=True, text=True)
    assert cancel.returncode == 0 and "the other trials go on" in cancel.stdout, cancel.stderr
    wait_until(lambda: f"trial {cancelled}: cancelled" in batch_log.read_text(), "the cancel")
    (tmp_path / "go").write_text("go\n")
    assert job.wait() == ("COMPLETED", "0:0"), batch_log.read_text()[-3000:]
    trials = {index: trial_lines(runs / f"pack-{job.id}_{index}") for index in range(8)}
    assert all(len(trials[index]) == 1 for index in range(8) if index != cancelled) and trials[cancelled] == [], trials
    ran = [trials[index][0] for index in range(8) if index != cancelled]
    assert [trial["nap"] for trial in ran] == [10 + index for index in range(8) if index != cancelled]  # its own
    assert len({trial["node"] for trial in ran}) == 2, ran  # both nodes of the one job
    overlapping = [(a, b) for a in ran for b in ran if a["index"] < b["index"] and a["node"] == b["node"]
                   and a["start"] < b["end"] and b["start"] < a["end"]]
    assert overlapping, ran  # trials ran side by side on a node ...
    assert all(a["gpus"] != b["gpus"] and a["gpus"] in ("0", "1") for a, b in overlapping), overlapping  # apart
    first_wave = sorted(ran[:4], key=lambda trial: trial["start"])
    assert first_wave[-1]["start"] - first_wave[0]["start"] < 2.0, first_wave  # four at once, in one job
    state = json.loads((runs / f"pack-{job.id}" / "pack-state.json").read_text())
    retried = [trial for trial in state["trials"] if trial["attempts"] == 2]
    assert len(retried) == 1 and len(list(tmp_path.glob("crashed-*"))) == 1, state
    crasher = retried[0]  # (the other node's last trial)
    crashed = (runs / f"pack-{job.id}_{crasher['index']}" / "logs" / "rank-0.out").read_text()
    assert crashed.index("CRASH") < crashed.index("TRIAL"), crashed  # crashed once, retried, then done
    said = batch_log.read_text()
    assert (f"trial {crasher['index']}: crashed (exit 3); retried on another share where one is free (attempt 2 of "
            "at most 2)" in said), said[-3000:]
    assert "7 done, 1 cancelled" in said, said[-3000:]
    released = re.search(r"released (\S+) at \d\d:\d\d:\d\d, (\d+) trials? done there", said)
    assert released and released.group(1) != host and int(released.group(2)) >= 1, said[-3000:]
    assert said.count("released ") == 1 and "could not give" not in said, said[-3000:]  # the batch host stays
    assert [run["how"] for run in crasher["runs"]] == ["crashed", "done"], crasher
    # It crashed on the other node as the last trial running there, while both of the batch host's shares were
    # held, so its retry could only run there: the node stayed for it, and went back only after its end.
    crash, retry = crasher["runs"]
    other = released.group(1)
    assert crash["nodes"] == retry["nodes"] == [other] and retry["started"] >= crash["ended"], crasher
    assert retry["slot"] != crash["slot"], crasher  # the node's other share: the one it crashed on may be the cause
    every_run = [run for trial in state["trials"] for run in trial["runs"]]
    assert all(run["ended"] <= crash["ended"] for run in every_run
               if run["nodes"] == [other] and run not in (crash, retry)), state  # none else ran there
    held = {run["slot"] for run in every_run if run["nodes"] == [host] and run["started"] <= crash["ended"]
            and (run.get("ended") or float("inf")) > retry["started"]}
    assert len(held) == 2, state  # both of the batch host's shares, from the crash to the retry's start
    [gone] = state["released"]
    assert gone["node"] == other and gone["at"] >= retry["ended"], state
    assert released.group(0) == f"released {other} at {time.strftime('%H:%M:%S', time.localtime(gone['at']))}, " \
        f"{gone['done']} trials done there", said[-3000:]
    assert gone["done"] == sum(run["how"] == "done" for run in every_run if run["nodes"] == [other]) == 4, state
    assert said.index(f"trial {crasher['index']} (attempt 2) started on {other} ") < said.index(released.group(0))
    status = subprocess.run(["hpc-train", "status", job.id], cwd=tmp_path, env=job.env, capture_output=True,
                            text=True)
    assert status.returncode == 0 and f"packed sweep {job.id} (pack): 8 trials: 7 done, 1 cancelled" in status.stdout, \
        status.stdout + status.stderr
    assert released.group(0) in status.stdout, status.stdout
    logs = subprocess.run(["hpc-train", "logs", f"{job.id}_3"], cwd=tmp_path, env=job.env, capture_output=True,
                          text=True)
    assert logs.returncode == 0 and '"nap": 13' in logs.stdout, logs.stdout + logs.stderr


RESUMABLE = """\
import json, os, pathlib, signal, sys, time
saved = pathlib.Path(os.environ["HPC_TRAIN_RUN_DIR"]) / "progress.json"
step = json.loads(saved.read_text())["step"] if saved.exists() else 0
print("START", step, flush=True)
stop = []
signal.signal(signal.SIGUSR1, lambda *_: stop.append(True))
while step < 8:
    if stop:  # the time-limit warning: save, and go on later (exit 75)
        saved.write_text(json.dumps({"step": step}))
        print("SAVED", step, flush=True)
        sys.exit(75)
    time.sleep(0.4)
    print("STEP", step, flush=True)
    step += 1
print("DONE", flush=True)
"""


def test_a_requeue_mid_sweep_resumes_the_running_trials_exactly_then_finishes_the_rest(
        cluster: LocalCluster, tmp_path: Path) -> None:
    (tmp_path / "resumable.py").write_text(RESUMABLE)
    job = submit(cluster, tmp_path, "requeued", "--gpus-per-node", "2", "--pack", "--max-parallel", "2",
                 "--no-snapshot", "--sweep", "seed=1,2,3,4", "--", sys.executable, "resumable.py")
    runs = tmp_path / "runs"
    logs = [runs / f"requeued-{job.id}_{index}" / "logs" / "rank-0.out" for index in range(4)]
    deadline = time.monotonic() + 120
    while not all(log.exists() and "STEP 2" in log.read_text() for log in logs[:2]):
        assert time.monotonic() < deadline, (runs / f"requeued-{job.id}" / f"slurm-requeued-{job.id}.out").read_text()
        time.sleep(0.2)
    subprocess.run(["scancel", "--batch", "--signal=USR1", job.id], env=job.env, check=True)  # as Slurm's B:USR1
    batch_log = runs / f"requeued-{job.id}" / f"slurm-requeued-{job.id}.out"
    assert job.wait() == ("COMPLETED", "0:0"), batch_log.read_text()[-3000:]
    said = batch_log.read_text()
    assert (f"the time limit is near: requeueing job {job.id}; 2 trial(s) resume from their checkpoints, 2 start "
            "after") in said, said
    assert said.count("pack " + job.id + " on ") == 2 and "4 done" in said, said[-3000:]
    for index, log in enumerate(logs):
        text = log.read_text()
        steps = [int(line.split()[1]) for line in text.splitlines() if line.startswith("STEP ")]
        assert steps == list(range(8)) and text.rstrip().endswith("DONE"), (index, text)  # each step once, in order
        if index < 2:  # stopped, saved, resumed where it saved
            saved = int(text.split("SAVED ")[1].split()[0])
            assert f"START {saved}" in text and saved >= 2, text
    state = json.loads((runs / f"requeued-{job.id}" / "pack-state.json").read_text())
    assert [trial["state"] for trial in state["trials"]] == ["done"] * 4
    assert [trial["requeues"] for trial in state["trials"]] == [1, 1, 0, 0]
    # --max-parallel 2 fits the batch host's 2 GPUs: the other node went back at the start, each time, and the
    # requeued job came back at its full size all the same (issue 48).
    sizes = re.findall(r"pack \d+ on (\S+):", said)
    assert len(sizes) == 2 and sizes[0] == sizes[1] and said.count("released ") == 2, said[-3000:]


NAME = "fixed-size-search"  # a name the site's policy (tests/e2e/fixed_size.lua) keeps from changing its nodes
REPORTING = """\
import os, time
import hpc_train
time.sleep(1)
hpc_train.report(1, float(os.environ["HPC_TRAIN_SWEEP_DROPOUT"]))  # a key of its own, read from the environment
"""


def test_an_adaptive_search_packed_asks_its_study_as_each_trial_starts_and_holds_a_node_its_site_will_not_take_back(
        cluster: LocalCluster, tmp_path: Path) -> None:
    (tmp_path / "reporting.py").write_text(REPORTING)
    job = submit(cluster, tmp_path, NAME, "--gpus-per-node", "2", "--pack", "--max-parallel", "2",
                 "--no-snapshot", "--sweep", "dropout=0.1:0.5", "--search", "tpe", "--trials", "4", "--",
                 sys.executable, "reporting.py")
    folder = tmp_path / "runs" / f"{NAME}-{job.id}"
    assert job.wait() == ("COMPLETED", "0:0"), (folder / f"slurm-{NAME}-{job.id}.out").read_text()[-3000:]
    state = json.loads((folder / "pack-state.json").read_text())
    runs = {trial["index"]: trial["runs"][0] for trial in state["trials"]}
    assert [trial["state"] for trial in state["trials"]] == ["done"] * 4
    assert runs[2]["started"] >= min(runs[0]["ended"], runs[1]["ended"])  # asked once an earlier one was told
    drawn = [json.loads((tmp_path / "runs" / f"{NAME}-{job.id}_{index}" / "trial.json").read_text())
             for index in range(4)]
    assert sorted(trial["number"] for trial in drawn) == [0, 1, 2, 3]
    rates = [trial["values"]["dropout"] for trial in drawn]
    assert len(set(rates)) == 4 and all(0.1 <= rate <= 0.5 for rate in rates), rates
    assert "dropout" not in (tmp_path / "runs" / f"{NAME}-{job.id}_0" / "config.yaml").read_text()
    report = subprocess.run(["hpc-train", "report", job.id], cwd=tmp_path, env=job.env, capture_output=True,
                            text=True)
    assert report.returncode == 0 and "pack-timeline.png" in report.stdout, report.stdout + report.stderr
    assert (folder / "pack-timeline.png").read_bytes()[:4] == b"\x89PNG"
    assert "COMPLETE" in report.stdout, report.stdout
    # --max-parallel 2 fits the batch host's 2 GPUs, so the pack asked Slurm at once to take the other node back:
    # the session cluster's job_submit.lua (fixed_size.lua, as a site's) refuses it for this job's name. One line,
    # the node held to the end (and used: it is paid for), every trial done all the same; Slurm's view: the job
    # ended on both nodes.
    said = (folder / f"slurm-{NAME}-{job.id}.out").read_text()
    held = {node for slot in state["slots"] for node in slot["nodes"]}
    assert len(held) == 2 and len(state["refused"]) == 1 and state["released"] == [], state
    assert any(state["refused"][0] in run["nodes"] for run in runs.values()), state  # paid for: used
    assert said.count("could not give") == 1, said[-3000:]
    assert f"could not give {state['refused'][0]} back to Slurm (Unspecified error for job {job.id}); the pack " \
           "holds it to its end" in said and "released " not in said, said[-3000:]
    shown = subprocess.run(["scontrol", "show", "job", job.id], env=job.env, capture_output=True, text=True).stdout
    assert "NumNodes=2 " in shown, shown


LASTING = """\
import os, pathlib, sys, time
folder = pathlib.Path(os.environ["HPC_TRAIN_RUN_DIR"])
with open(folder / "started", "a") as started:
    started.write(os.environ["SLURMD_NODENAME"] + "\\n")
time.sleep(1 if os.environ["HPC_TRAIN_TRIAL"] == "0" else 90)  # the others: until their node is lost, or cancelled
"""


def test_a_lost_node_restarts_only_its_trials_elsewhere_and_cancel_jobid_ends_the_whole_pack(
        cluster: LocalCluster, tmp_path: Path) -> None:
    (tmp_path / "lasting.py").write_text(LASTING)
    job = submit(cluster, tmp_path, "lose", "--gpus-per-node", "2", "--pack", "--max-retries", "0", "--no-snapshot",
                 "--sweep", "seed=1,2,3,4", "--", sys.executable, "lasting.py")
    runs = tmp_path / "runs"
    batch_log = runs / f"lose-{job.id}" / f"slurm-lose-{job.id}.out"
    started = [runs / f"lose-{job.id}_{index}" / "started" for index in range(4)]

    def nodes(index: int) -> list[str]:
        return started[index].read_text().split() if started[index].exists() else []

    def wait_until(done, what: str) -> None:
        deadline = time.monotonic() + 120
        while not done():
            assert time.monotonic() < deadline, f"{what} never came:\n{batch_log.read_text()[-3000:]}"
            time.sleep(0.3)

    # Trials spread over the nodes (issue 46): 0 and 2 share the first node's two GPUs (where the batch script, so
    # the pack, runs), 1 and 3 the other's; trial 0 is over in a second, and frees its share.
    wait_until(lambda: all(nodes(index) for index in range(4)) and "trial 0: done" in batch_log.read_text(),
               "the four trials' start and trial 0's end")
    first, lost = nodes(0)[0], nodes(1)[0]
    assert nodes(2) == [first] and nodes(3) == [lost] != [first], [nodes(index) for index in range(4)]
    env = job.env
    subprocess.run(["scontrol", "update", f"NodeName={lost}", "State=DOWN", "Reason=e2e-lost-node"], env=env,
                   check=True)
    try:
        # Both trials of the lost node restart, no retry spent (0 allowed): one on trial 0's share, one waiting;
        # trial 2 goes on where it was.
        wait_until(lambda: len(nodes(1)) + len(nodes(3)) == 3, "a lost trial's restart on the other node")
        restarted = 1 if len(nodes(1)) == 2 else 3
        assert nodes(restarted)[1] == first and nodes(2) == [first] and job.state()[0] == "RUNNING"
        said = batch_log.read_text()
        assert f"node(s) {lost} lost: the trials on them restart on the 2 share(s) left" in said, said[-3000:]
        assert said.count("ended with its node") == 2, said[-3000:]
        cancel = subprocess.run(["hpc-train", "cancel", job.id], cwd=tmp_path, env=env, capture_output=True,
                                text=True)
        assert cancel.returncode == 0, cancel.stderr
        assert job.wait()[0] == "CANCELLED"
    finally:
        subprocess.run(["scontrol", "update", f"NodeName={lost}", "State=RESUME"], env=env, capture_output=True)
    state = json.loads((runs / f"lose-{job.id}" / "pack-state.json").read_text())
    assert [trial["state"] for trial in state["trials"]] == ["done", "cancelled", "cancelled", "cancelled"], state
    assert state["lost"] == [lost] and [trial["losses"] for trial in state["trials"]] == [0, 1, 0, 1]
    status = subprocess.run(["hpc-train", "status", job.id], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert "4 trials: 3 cancelled, 1 done" in status.stdout and f"lost:    {lost}" in status.stdout, status.stdout
