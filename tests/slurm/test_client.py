"""The Slurm client: the command lines each method runs, what it makes of the answers, and that a missing or
silent Slurm is a failed run with its reason, never a traceback (on FakeSlurm, in-process and on PATH)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.errors import HpcTrainError
from hpc_train.slurm.client import NOT_FOUND, TIMED_OUT, SlurmClient, fields, last_words
from hpc_train.slurm.transport import LocalTransport
from tests.fake_slurm import FakeSlurm, Reply


def test_each_method_runs_its_command_line(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path, {"scontrol": "", "squeue": "", "sacct": "", "scancel": "", "sinfo": "",
                                "srun": "", "sacctmgr": "", "sbatch": "7"})
    slurm = fake.client()
    slurm.show_job("42")
    slurm.show("partition")
    slurm.queued_states(["1", "2"])
    slurm.array_states("12")
    slurm.queue_state("42")
    slurm.queued_job_ids()
    slurm.accounting(["1", "2"])
    slurm.recent_accounting()
    slurm.test_only(["--nodes=2"])
    slurm.cancel(["1", "2"])
    slurm.node_states("debug")
    slurm.update_node("n1", State="RESUME")
    slurm.update_job("42", ExcNodeList="n2")
    slurm.requeue("42")
    slurm.srun(["hostname"], timeout=5)
    slurm.sacctmgr(["-i", "add", "cluster", "x"])
    slurm.answers()
    assert fake.lines() == [
        "scontrol show job -o 42", "scontrol show partition -o", "squeue -h -t all -j 1,2 -o %i %T",
        "squeue -h -t all -j 12 -o %i %T", "squeue -h -j 42 -o %T", "squeue -h -o %i",
        "sacct -j 1,2 -X -D -n -P -o JobID,State,ExitCode,Elapsed,NodeList,Partition", "sacct -n -X -o JobID -S now-1hours",
        "sbatch --test-only --nodes=2 --wrap=true", "scancel 1 2", "sinfo -h -N -p debug -o %N %t",
        "scontrol update NodeName=n1 State=RESUME", "scontrol update JobId=42 ExcNodeList=n2", "scontrol requeue 42",
        "srun hostname", "sacctmgr -i add cluster x", "sinfo -h"]


def test_nothing_to_ask_asks_nothing(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path, {"squeue": "", "sacct": "", "scancel": ""})
    slurm = fake.client()
    assert (slurm.queued_states([]), slurm.accounting([]), slurm.cancel([])) == ({}, "", None)
    assert fake.calls() == []


def test_answers_are_read_into_what_callers_need(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path, {
        "scontrol show job": "JobId=42 JobState=RUNNING NodeList=n[1-2]\n",
        "scontrol show config": "MaxArraySize            = 1001\nMinJobAge = 300\n",
        "squeue -h -t all": "11 RUNNING\n12 COMPLETED\n99 PENDING\nnoise\n",
        "squeue -h -j": "COMPLETING\n",
        "squeue -h -s -j 42": "42.0 python\n42.1 hpc-train-data-dispatcher\nnoise\n",
        "sinfo": "n1 idle\nn2 down*\n",
        "sacct": Reply(stderr="sacct: error: Slurm accounting storage is disabled", code=1),
    })
    slurm = fake.client()
    assert slurm.show_job("42") == {"JobId": "42", "JobState": "RUNNING", "NodeList": "n[1-2]"}
    assert (slurm.config_value("MaxArraySize"), slurm.config_value("Nothing")) == ("1001", None)
    assert slurm.queued_states(["11", "12"]) == {"11": "RUNNING", "12": "COMPLETED"}  # 99 was not asked for
    assert slurm.queue_state("42") == "COMPLETING"
    assert slurm.running_steps("42") == {"python": "42.0", "hpc-train-data-dispatcher": "42.1"}
    assert slurm.node_states() == {"n1": "idle", "n2": "down*"}
    assert slurm.accounting(["42"]) is None  # no accounting here


def test_refusals_are_their_reasons(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path, {"scontrol requeue": Reply(stderr="scontrol: error: disabled\n", code=1),
                                "scancel": Reply(code=1),
                                "sbatch": Reply(stderr="sbatch: error: no partition", code=1)})
    slurm = fake.client()
    assert slurm.requeue("42") == "scontrol: error: disabled"
    assert slurm.cancel(["42"]) == "no reason given"
    with pytest.raises(HpcTrainError, match="^sbatch job.sh failed: sbatch: error: no partition$"):
        slurm.submit_script("job.sh")
    with pytest.raises(HpcTrainError, match="^sbatch failed: sbatch: error: no partition$"):
        slurm.submit_text("#!/bin/bash\n")


def test_a_script_is_submitted_by_its_path_or_by_its_text_on_stdin(tmp_path: Path) -> None:
    (tmp_path / "job.sh").write_text("#!/bin/bash\necho by path\n")
    fake = FakeSlurm(tmp_path / "fake", {"sbatch": ["42;cluster", "43"]})
    slurm = fake.client()
    assert slurm.submit_script("job.sh", ["--set", "epochs=1"], cwd=tmp_path) == "42"
    assert slurm.submit_text("#!/bin/bash\necho by text\n", cwd=tmp_path) == "43"
    by_path, by_text = fake.calls("sbatch")
    assert (by_path.args, by_path.script, by_path.stdin) == (["--parsable", "job.sh", "--set", "epochs=1"],
                                                            "#!/bin/bash\necho by path\n", None)
    assert (by_text.args, by_text.script) == (["--parsable"], "#!/bin/bash\necho by text\n")


def test_without_scontrol_there_is_no_requeue_and_nothing_runs(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path, {"squeue": ""})
    slurm = fake.client()
    assert not slurm.available("scontrol") and slurm.available("squeue")
    assert slurm.requeue("42") == "scontrol not found" and fake.calls() == []


def test_a_missing_slurm_is_a_failed_run_saying_why(tmp_path: Path) -> None:
    slurm = SlurmClient.local({"PATH": str(tmp_path)})
    result = slurm.run(["sinfo", "-h"])
    assert (result.returncode, result.stdout) == (NOT_FOUND, "")
    assert last_words(result).startswith("cannot run sinfo: ")
    assert not slurm.available("sinfo") and not slurm.answers()
    assert slurm.show_job("42") == {} and slurm.node_states() == {} and slurm.queue_state("42") == ""


def test_a_silent_slurm_is_a_failed_run_after_its_timeout(tmp_path: Path) -> None:
    env = FakeSlurm(tmp_path / "fake", {"scontrol": Reply(shell="exec sleep 30")}).install(tmp_path / "bin")
    slurm = SlurmClient(env, LocalTransport())
    result = slurm.run(["scontrol", "ping"], timeout=1)
    assert (result.returncode, last_words(result)) == (TIMED_OUT, "scontrol did not answer within 1 s")
    assert slurm.config_value("MaxArraySize", timeout=0.5) is None


def test_on_path_the_same_table_answers_and_records(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path / "fake", {"squeue": ["7 PENDING", "7 RUNNING"], "sbatch": "8"})
    slurm = SlurmClient.local(fake.install(tmp_path / "bin"))
    assert [slurm.queued_states(["7"]) for _ in range(3)] == [{"7": "PENDING"}, {"7": "RUNNING"}, {"7": "RUNNING"}]
    assert slurm.submit_text("#!/bin/bash\nsrun true\n") == "8"
    assert fake.calls("sbatch")[0].script == "#!/bin/bash\nsrun true\n"
    assert fake.lines("squeue") == ["squeue -h -t all -j 7 -o %i %T"] * 3


def test_settings_and_records_read_as_words() -> None:
    assert fields("JobId=42 Name=a=b Reason=None junk") == {"JobId": "42", "Name": "a=b", "Reason": "None"}


def test_the_environment_slurm_runs_with_is_the_clients(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_CONF", "/here/slurm.conf")
    assert SlurmClient.local().variable("SLURM_CONF") == "/here/slurm.conf"  # this process's, at each call
    assert SlurmClient.local({"SLURM_CONF": "/there"}).variable("SLURM_CONF") == "/there"
    assert SlurmClient.local({}).variable("SLURM_CONF") is None
