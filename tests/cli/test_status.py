"""`status`, `list` and `report` of a job Slurm no longer knows (no accounting, forgotten after MinJobAge): its run
folder says how it ended, its nodes, attempts and time, and the output says where that came from (issue 36, 2).
Slurm's commands are FakeSlurm's, on PATH, as a user's shell would run them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hpc_train.runs.folders import JobRecord
from hpc_train.runs.metrics import write_metrics
from tests.cli.running import run_main
from tests.fake_slurm import FakeSlurm, Reply

NO_ACCOUNTING = Reply(stderr="sacct: error: Slurm accounting storage is disabled\n", code=1)
FORGOTTEN = Reply(stderr="slurm_load_jobs error: Invalid job id specified\n", code=1)


def demo_job(work: Path) -> Path:
    """What env/demo.sh leaves: job 1 on pnode[1-2], its trainer finished after 65 s of its one attempt."""
    folder = work / "runs" / "mnist-2node-1"
    JobRecord("1", "mnist-2node", "runs/mnist-2node-1", 2, 2, "multiworker", 1000.0).write()
    (folder / "state.json").write_text(json.dumps({
        "state": "finished", "time": 1065.0, "attempt": {"number": 1, "nodes": "pnode[1-2]", "started": 1000.0},
        "ended": [{"attempt": 1, "nodes": "pnode[1-2]", "started": 999.0, "ended": 1066.0, "exit": 0,
                   "goes_on": False}]}))
    write_metrics(folder, {"epochs": [{"epoch": 1, "val_accuracy": 0.95}, {"epoch": 2, "val_accuracy": 0.97}]})
    return folder


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in [name for name in os.environ if name.startswith("SLURM")]:
        monkeypatch.delenv(name)
    demo_job(tmp_path)
    return tmp_path


def slurm(work: Path, monkeypatch: pytest.MonkeyPatch, scontrol: str | Reply, squeue: str = "") -> FakeSlurm:
    fake = FakeSlurm(work / "fake", {"scontrol": scontrol, "squeue": squeue, "sacct": NO_ACCOUNTING})
    monkeypatch.setenv("PATH", fake.install(work / "bin")["PATH"])
    return fake


def test_status_list_and_report_of_a_forgotten_job_read_its_run_folder(
        work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    slurm(work, monkeypatch, FORGOTTEN)
    code, out, err = run_main(["status", "1"], capsys)
    assert code == 0, err
    assert out.splitlines()[:2] == [
        "job 1 (mnist-2node): completed, exit 0 [from the run folder: Slurm no longer knows the job]",
        "  nodes:   pnode[1-2] (2 tasks, multiworker)"]
    assert "  elapsed: 00:01:07 (1 attempt)" in out.splitlines()
    code, out, err = run_main(["list"], capsys)
    assert code == 0, err
    assert out.splitlines()[1].split()[:6] == ["1", "mnist-2node", "completed", "(from", "the", "run"]
    assert "completed (from the run folder)  " in out
    code, out, err = run_main(["report", "1"], capsys)
    assert code == 0, err
    [row] = [line for line in out.splitlines() if line.startswith("1 ")]
    assert row.split()[1:] == ["0", "0.9700", "2", "completed", "(from", "the", "run", "folder)"]


def test_where_slurm_still_knows_the_job_its_word_wins(work: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    slurm(work, monkeypatch, "JobId=1 JobState=CANCELLED ExitCode=0:15 RunTime=00:00:09 NodeList=node[7-8]\n",
          squeue="1 CANCELLED\n")
    code, out, err = run_main(["status", "1"], capsys)
    assert code == 0, err
    assert out.splitlines()[:2] == ["job 1 (mnist-2node): cancelled, exit 0:15 [scontrol/squeue: no Slurm "
                                    "accounting here]", "  nodes:   node[7-8] (2 tasks, multiworker)"]
    assert "  elapsed: 00:00:09" in out.splitlines()
    assert run_main(["list"], capsys)[1].splitlines()[1].split()[2] == "cancelled"


@pytest.mark.parametrize("partition, shown", [("gpu", ", partition gpu"), ("gpu,debug", ", partition gpu or debug")])
def test_status_says_the_partition_the_job_got(partition: str, shown: str, work: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """(issue 37, 3) submitted with --partition gpu,debug: Slurm's list while it waits, the one it got once it
    started."""
    state = "RUNNING" if "," not in partition else "PENDING"
    slurm(work, monkeypatch, f"JobId=1 JobState={state} ExitCode=0:0 RunTime=00:00:09 NodeList=node[7-8] "
                             f"Partition={partition}\n", squeue=f"1 {state}\n")
    code, out, err = run_main(["status", "1"], capsys)
    assert code == 0, err
    assert out.splitlines()[1] == f"  nodes:   node[7-8] (2 tasks, multiworker){shown}"


def test_status_says_the_partition_sacct_remembers(work: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    fake = slurm(work, monkeypatch, FORGOTTEN)
    fake.on("sacct", "1|COMPLETED|0:0|00:01:02|node[1-2]|debug\n")
    code, out, err = run_main(["status", "1"], capsys)
    assert code == 0, err
    assert out.splitlines()[1] == "  nodes:   node[1-2] (2 tasks, multiworker), partition debug"


def test_status_sums_the_ledger_in_one_line_and_report_draws_it(work: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from hpc_train.runs import goodput

    folder = work / "runs" / "mnist-2node-1"  # its attempt ran 999 to 1066 (67 s); its ranks measured it
    goodput.note_body(folder, 1, started=999.0, nodes=2, gpus=0, ranks_ended=1065.0)
    goodput.note_ranks(folder, 1, {"first_steps": 1003.0, "totals": {"input": 12.0, "compute": 47.6,
                                                                       "checkpoint": 1.3}, "trained": 1064.8})
    slurm(work, monkeypatch, FORGOTTEN)
    code, out, err = run_main(["status", "1"], capsys)
    assert code == 0, err
    assert out.splitlines()[-1] == "  goodput 71%: input 18%, startup 6%, checkpoint 2%, lost 0%, idle 2%, other 1%"
    code, out, err = run_main(["report", "1"], capsys)
    assert code == 0, err
    assert f"wrote runs/mnist-2node-1/{'ledger.png'} (the goodput ledger: where the allocation's time went)" in out
    assert (folder / "ledger.png").is_file()


def test_status_lists_the_data_services_processes_and_their_state(
        work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A running job with a data service (the body's data_service.json): each process and what Slurm says of its
    step now; the dispatcher's step listed by squeue --steps, the workers' not (lost, being started again)."""
    from hpc_train.runs.servicerecord import note_service

    note_service(work / "runs" / "mnist-2node-1", state="running", attempt=1, address="grpc://pnode1:26263",
                 workers=[26262, 26261], restarts=1)
    fake = slurm(work, monkeypatch, "JobId=1 JobState=RUNNING NodeList=pnode[1-2] RunTime=00:01:00 Restarts=0",
                 squeue="1.1 hpc-train-data-dispatcher\n1.0 python\n")
    code, out, err = run_main(["status", "1"], capsys)
    assert code == 0, err
    assert ("  data service: dispatcher grpc://pnode1:26263 running (step 1.1); 2 data worker(s) on port(s) "
            "26262,26261 not running, its workers started again 1 time(s)") in out.splitlines(), out
    assert any(call.argv[:5] == ("squeue", "-h", "-s", "-j", "1") for call in fake.calls()), fake.calls()
    note_service(work / "runs" / "mnist-2node-1", state="stopped")
    code, out, err = run_main(["status", "1"], capsys)
    assert "  data service: stopped after the ranks' step, its workers started again 1 time(s)" in out.splitlines()


def test_status_of_a_job_with_its_data_service_on_a_partition_of_its_own(work: Path, monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The service's component is the job's last part; the partition said is the ranks' (Slurm's `scontrol show job`
    of a heterogeneous job, whose last line is the service's component on cpu)."""
    from hpc_train.login.submission import components
    from hpc_train.spec.data_service import DataService
    from hpc_train.spec.request import JobRequest

    spec = JobRequest.one_group(2, 1, partition="gpu", data_service=DataService(1, "cpu"))
    JobRecord("1", "mnist-2node", "runs/mnist-2node-1", 2, 2, "multiworker", 1000.0,
              components=components(spec)).write()
    slurm(work, monkeypatch, "JobId=1 JobState=RUNNING ExitCode=0:0 RunTime=00:00:09 NodeList=hgpu[1-2] "
                             "Partition=gpu\nJobId=2 JobState=RUNNING ExitCode=0:0 RunTime=00:00:09 NodeList=hcpu1 "
                             "Partition=cpu\n", squeue="1 RUNNING\n")
    code, out, err = run_main(["status", "1"], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1] == "  nodes:   hgpu[1-2] + hcpu1 (2 tasks, multiworker), partition gpu", out
    assert lines[2:4] == ["  part 0:  gpu, 2 node(s), 2 task(s) (worker), 1 GPU(s) per node",
                          "  part 1:  cpu, ? node(s), 2 task(s) (data service), no GPU(s) per node"], out
