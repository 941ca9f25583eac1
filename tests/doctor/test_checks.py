"""hpc-train doctor: judging the test step's reports (pure), its Slurm checks on FakeSlurm, and its one-line refusal
without a usable Slurm."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpc_train.doctor.checks import accounting, run_step, slurm_partition, step_checks, try_from_here
from hpc_train.errors import HpcTrainError
from hpc_train.login.partitions import Partition
from tests.fake_slurm import FakeSlurm, Reply

GUARDED = {"outside": "no answer", "memlock": -1, "nofile": 1048576}
TWO_GOOD = [{"node": "node1", "tensorflow": "2.21.0", "tf_keras": "2.21.0", "address": "node1:16400",
             "data": "/d: 3 entries", **GUARDED},
            {"node": "node2", "tensorflow": "2.21.0", "tf_keras": "2.21.0", "address": "node2:16401",
             "data": "/d: 3 entries", **GUARDED}]


def test_a_healthy_step_passes_every_check() -> None:
    checks = step_checks(TWO_GOOD, 2, "2.21.0", "/d")
    assert [(check.name, check.passed, check.warn) for check in checks] == [
        ("tensorflow", True, False), ("keras", True, False), ("ports", True, False), ("data", True, False),
        ("outside", True, False), ("memlock", True, False), ("nofile", True, False)]
    assert checks[2].line() == "ok    ports: tasks reached each other at node1:16400, node2:16401"
    assert checks[4].line() == ("ok    outside: the job's ports are closed to this host, outside the job "
                                "(node1:16400: no answer, node2:16401: no answer)")
    assert checks[5].line() == "ok    memlock: unlimited on every node: enough for NCCL over InfiniBand"
    assert checks[6].line() == "ok    nofile: 1048576 or more open files on every node"


def test_open_ports_and_low_limits_are_warnings_with_their_fix_and_the_run_still_passes() -> None:
    reports = [{**TWO_GOOD[0], "outside": "accepted", "memlock": 8 * 1024 * 1024, "nofile": 1024}, TWO_GOOD[1]]
    warned = {check.name: check.line() for check in step_checks(reports, 2, "2.21.0", None) if check.warn}
    assert all(check.passed for check in step_checks(reports, 2, "2.21.0", None))
    assert warned["outside"].startswith("warn  outside: the job's ports take connections from this host, outside "
                                        "the job (node1:16400): anyone on the network can run TensorFlow graphs")
    assert warned["outside"].endswith("; fix: install the site firewall as Slurm's Prolog and Epilog "
                                      "(docs/site-firewall.md)")
    assert warned["memlock"].startswith("warn  memlock: node1: 8192 KiB: multi-node NCCL over InfiniBand wants "
                                        "unlimited locked memory; fix: set memlock unlimited for jobs")
    assert warned["nofile"].startswith("warn  nofile: node1: 1024 open files: multi-node NCCL wants 65536 or more; "
                                       "fix: raise it")


def test_the_login_nodes_try_tells_accepted_and_refused_apart() -> None:
    import socket

    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        assert try_from_here(f"127.0.0.1:{port}") == "accepted"
    assert try_from_here(f"127.0.0.1:{port}") == "refused"  # closed now; nothing dropped it
    # A drop (no answer) is tried end to end: tests/e2e/test_site_firewall.py.


def test_tf_keras_missing_or_of_another_version_is_a_failed_line_with_the_pip_command() -> None:
    for tf_keras, said in ((None, "node2: tf-keras is not installed, so tf.keras is Keras 3"),
                           ("2.20.1", "node2: tf-keras 2.20.1 does not match TensorFlow 2.21.0")):
        reports = [TWO_GOOD[0], {**TWO_GOOD[1], "tf_keras": tf_keras}]
        [keras] = [check for check in step_checks(reports, 2, "2.21.0", None) if check.name == "keras"]
        assert not keras.passed and keras.line().startswith(f"FAIL  keras: {said}")
        assert "pip install tf-keras~=2.21.0" in keras.line()


def test_each_problem_is_one_failed_line_with_its_fix() -> None:
    reports = [{**TWO_GOOD[0], "tensorflow": "2.20.0"},
               {"node": "node2", "tensorflow": "2.21.0", "peers_error": "worker 0 did not answer within 60 s",
                "data_error": "/d: Permission denied"}]
    failed = {check.name: check.line() for check in step_checks(reports, 2, "2.21.0", "/d") if not check.passed}
    assert failed["tensorflow"].startswith("FAIL  tensorflow: versions differ: nodes 2.20.0, 2.21.0, here 2.21.0; fix:")
    assert failed["ports"].startswith("FAIL  ports: worker 0 did not answer within 60 s; fix: let the nodes reach")
    assert failed["data"].startswith("FAIL  data: node2: /d: Permission denied; fix:")
    assert not step_checks(TWO_GOOD[:1], 2, "2.21.0", None)[0].passed  # a task that never reported


def test_a_missing_slurm_conf_is_one_line_and_a_failure(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "hpc_train", "doctor"], capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin", "SLURM_CONF": str(tmp_path / "missing.conf")}, timeout=60)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    expected = "is not a file; point it at" if shutil.which("sinfo") else "no Slurm commands here"
    assert result.stderr.startswith("hpc-train doctor: error: ") and expected in result.stderr


def test_the_slurm_checks_ask_the_client_they_are_given(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path, {
        "sinfo": "", "srun": "hpc-train-doctor: not json\n",
        "scontrol show partition": "PartitionName=debug Default=YES Nodes=n[1-2] TotalNodes=2 MaxNodes=UNLIMITED\n",
        "scontrol show node": "NodeName=n1 Gres=(null)\nNodeName=n2 Gres=(null)\n",
        "sacct": Reply(stderr="sacct: error: Slurm accounting storage is disabled\n", code=1)})
    slurm = fake.client()
    assert slurm_partition(slurm, None).name == "debug"
    with pytest.raises(HpcTrainError, match=r"no partition gpu here \(partitions: debug\); pass --partition NAME"):
        slurm_partition(slurm, "gpu")
    check = accounting(slurm)
    assert check.passed and check.detail.startswith("none (sacct: error: Slurm accounting storage is disabled)")
    assert run_step(slurm, Partition("debug", 2, None, None, (0, 0)), 2, None, 5) == ([], "")
    assert fake.lines("srun")[0].startswith("srun --nodes=2 --ntasks-per-node=1 --partition=debug --immediate=5 ")
    without = FakeSlurm(tmp_path / "none", {"sbatch": ""}).client()
    with pytest.raises(HpcTrainError, match=r"^no Slurm commands here \(sinfo, srun not found\)"):
        slurm_partition(without, None)


def test_the_tensorflow_line_says_what_precision_auto_picks_on_each_node() -> None:
    amx = {"policy": "mixed_bfloat16", "why": "auto: the CPU has AMX"}
    same = [{**report, "precision": amx} for report in TWO_GOOD]
    [tensorflow] = [check for check in step_checks(same, 2, "2.21.0", None) if check.name == "tensorflow"]
    assert tensorflow.line() == ("ok    tensorflow: 2.21.0 on 2 nodes; precision auto: mixed_bfloat16 on node1, node2 "
                                 "(the CPU has AMX)")
    old = {"policy": "float32", "why": "auto: the CPU has no bf16 units (AMX, AVX512-BF16)"}
    mixed = [{**TWO_GOOD[0], "precision": amx}, {**TWO_GOOD[1], "precision": old}]
    [tensorflow] = [check for check in step_checks(mixed, 2, "2.21.0", None) if check.name == "tensorflow"]
    assert tensorflow.passed and tensorflow.detail.endswith(
        "float32 on node2 (the CPU has no bf16 units (AMX, AVX512-BF16)) (the nodes differ: a job across them "
        "trains in the weakest)")


def test_the_ps_partition_is_checked_and_named_in_its_refusal(tmp_path: Path) -> None:
    from hpc_train.doctor.checks import ps_partition

    slurm = FakeSlurm(tmp_path, {
        "sinfo": "", "srun": "",
        "scontrol show partition": "PartitionName=gpu Default=YES Nodes=g[1-2] TotalNodes=2 MaxNodes=UNLIMITED\n"
                                   "PartitionName=cpu Default=NO Nodes=c[1-3] TotalNodes=3 MaxNodes=UNLIMITED\n",
        "scontrol show node": "NodeName=g1 Gres=gpu:2\nNodeName=g2 Gres=gpu:2\nNodeName=c1 Gres=(null)\n"
                              "NodeName=c2 Gres=(null)\nNodeName=c3 Gres=(null)\n"}).client()
    check = ps_partition(slurm, "cpu", "cpu,mem,energy,node,billing,fs/disk,vmem,pages,gres/gpu")
    assert check.passed and check.detail.startswith("partition cpu: 3 nodes, no GPUs; heterogeneous jobs put")
    assert "AccountingStorageTRES lacks gres/gpu" in ps_partition(slurm, "gpu", None).detail
    with pytest.raises(HpcTrainError, match=r"no partition nowhere here \(partitions: gpu, cpu\); pass --ps-partition"):
        ps_partition(slurm, "nowhere", None)


def test_the_data_partition_is_checked_and_named_in_its_refusal(tmp_path: Path) -> None:
    from hpc_train.doctor.checks import data_partition

    slurm = FakeSlurm(tmp_path, {
        "sinfo": "", "srun": "",
        "scontrol show partition": "PartitionName=gpu Default=YES Nodes=g[1-2] TotalNodes=2 MaxNodes=UNLIMITED\n"
                                   "PartitionName=cpu Default=NO Nodes=c[1-3] TotalNodes=3 MaxNodes=UNLIMITED\n",
        "scontrol show node": "NodeName=g1 Gres=gpu:2\nNodeName=g2 Gres=gpu:2\nNodeName=c1 Gres=(null)\n"
                              "NodeName=c2 Gres=(null)\nNodeName=c3 Gres=(null)\n"}).client()
    check = data_partition(slurm, "cpu")
    assert check.passed and check.line().startswith("ok") and "partition cpu: 3 nodes, CPU nodes" in check.line()
    assert "2 GPUs each, which data workers do not use" in data_partition(slurm, "gpu").detail
    with pytest.raises(HpcTrainError, match=r"no partition cpus here \(partitions: gpu, cpu\); pass --data-partition"):
        data_partition(slurm, "cpus")


def test_doctor_says_whether_every_rank_started_in_the_image_or_why_not() -> None:
    from hpc_train.container.runtime import Container
    from hpc_train.doctor.container import container_check

    image = Container("/images/tf", "charliecloud")
    inside = [{"rank": "0", "container": "charliecloud"}, {"rank": "1", "container": "charliecloud"}]
    assert container_check(image, inside, 2, "").line() == (
        "ok    container: charliecloud: ch-run on the nodes; 2 rank(s) started in /images/tf")
    missing = container_check(image, [], 2, "slurmstepd: error: execve(): ch-run: No such file or directory")
    assert not missing.passed and missing.detail.startswith("ch-run is not on the nodes")
    assert "install charliecloud there" in missing.line()
    refused = container_check(image, [], 2, "hpc-train 0.1: the charliecloud image's TensorFlow 2.12.0 is not ...")
    assert not refused.passed and refused.detail.startswith("0 of 2 rank(s) started in /images/tf (hpc-train 0.1")
    outside = container_check(image, [{"rank": "0", "container": None}, *inside[1:]], 2, "")
    assert not outside.passed


def test_unlimited_limits_read_as_unlimited_and_an_older_step_says_nothing() -> None:
    from hpc_train.doctor.checks import limit_checks

    lines = [check.line() for check in limit_checks([{"node": "n1", "memlock": -1, "nofile": -1}])]
    assert lines == ["ok    memlock: unlimited on every node: enough for NCCL over InfiniBand",
                     "ok    nofile: unlimited open files on every node"]
    assert limit_checks([{"node": "n1"}]) == []


def test_doctor_checks_each_partition_of_a_list(tmp_path: Path) -> None:
    """(issue 46, 5) `doctor --partition a,b` checked only the first."""
    from tests.fake_slurm import without_slurm

    fake = FakeSlurm(tmp_path / "fake", {
        "sinfo": "", "srun": Reply(stderr="srun: error: Unable to allocate resources: Requested node configuration "
                                          "is not available\n", code=1),
        "scontrol show partition": "PartitionName=debug Default=YES Nodes=n[1-2] TotalNodes=2 MaxNodes=UNLIMITED\n"
                                   "PartitionName=gpu Default=NO Nodes=g1 TotalNodes=1 MaxNodes=UNLIMITED\n",
        "scontrol show node": "NodeName=n1 Gres=(null)\nNodeName=n2 Gres=(null)\nNodeName=g1 Gres=gpu:2\n",
        "scontrol show config": "", "sacct": Reply(stderr="sacct: error: accounting storage is disabled\n", code=1)})
    env = {**without_slurm(), "PATH": fake.install(tmp_path / "bin")["PATH"]}
    result = subprocess.run([sys.executable, "-m", "hpc_train", "doctor", "--partition", "debug,gpu", "--wait", "1"],
                            capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any(line.endswith("partition debug (default): 2 nodes") for line in lines), lines
    assert any(line.endswith("partition gpu: 1 nodes") for line in lines), lines
    assert [line.split(" on ")[1].split()[0] for line in lines if line.startswith("...   step:")] == ["debug", "gpu"]
    assert [line.split("--partition=")[1].split()[0] for line in fake.lines("srun")] == ["debug", "gpu"]
    unknown = subprocess.run([sys.executable, "-m", "hpc_train", "doctor", "--partition", "debug,nosuch"],
                             capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert unknown.returncode == 2 and "no partition nosuch here (partitions: debug, gpu)" in unknown.stderr
    assert len(fake.lines("srun")) == 2  # refused before any step
