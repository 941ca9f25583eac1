"""`hpc-train launch`, the mock srun: environments, output, fail-fast, and the job scripts without Slurm."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpc_train.bootstrap import compute_layout
from hpc_train.bootstrap.placement import Distribution
from hpc_train.errors import HpcTrainError
from hpc_train.injob.mock_srun import MachineGpus, Step, gpu_environments, rank_environments
from tests.fake_nvidia import install_nvidia_smi, path_without_nvidia_smi, uuid
from tests.fake_slurm import without_slurm
from tests.mnist_data import shared_mnist

ROOT = Path(__file__).resolve().parents[2]


def launch_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpc_train", "launch", *args], cwd=cwd, text=True,
                          capture_output=True, timeout=timeout, env={**without_slurm(), **(env or {})})


def test_every_task_gets_the_variables_srun_sets() -> None:
    step = Step(("n1", "n2"), 2, Distribution.CYCLIC, job_id=77)
    envs = rank_environments(step, {"HOME": "/h", "SLURM_JOB_ID": "stale", "TF_CONFIG": "stale"})
    assert [(e["SLURM_PROCID"], e["SLURMD_NODENAME"], e["SLURM_NODEID"], e["SLURM_LOCALID"]) for e in envs] == [
        ("0", "n1", "0", "0"), ("1", "n2", "1", "0"), ("2", "n1", "0", "1"), ("3", "n2", "1", "1")]
    first = envs[0]
    assert (first["SLURM_STEP_NODELIST"], first["SLURM_STEP_TASKS_PER_NODE"], first["SLURM_STEP_NUM_TASKS"],
            first["SLURM_JOB_ID"], first["SLURM_DISTRIBUTION"], first["HOME"]) == ("n[1-2]", "2(x2)", "4", "77",
                                                                                   "cyclic", "/h")
    assert "TF_CONFIG" not in first
    # and the bootstrap, reading them, finds each task where the launcher put it
    for rank, env in enumerate(envs):
        assert compute_layout(env).me.rank == rank


def test_default_nodes_are_distinct_loopback_hosts() -> None:
    assert Step.make(3, 1).nodes == ("127.0.0.1", "127.0.0.2", "127.0.0.3")


@pytest.mark.parametrize("args, message", [
    ((0, 1), "--nodes 0: must be 1 or more"), ((2, 0), "--ntasks-per-node 0: must be 1 or more"),
    ((3, 1, "a[1-2]"), "names 2 nodes but --nodes is 3"), ((1, 1, "a[1-"), "--nodelist='a[1-'"),
    ((1, 1, None, "block", 7, -1), "--gpus-per-node -1: must be 0 or more"),
])
def test_impossible_steps_are_refused(args: tuple, message: str) -> None:
    with pytest.raises(HpcTrainError, match=message.replace("[", r"\[")):
        Step.make(*args)


def test_output_is_prefixed_by_rank_and_arguments_pass_verbatim(tmp_path: Path) -> None:
    hostile = "$(touch PWNED); `touch PWNED` 'quoted'"
    result = launch_cli("--nodes", "2", "--ntasks-per-node", "2", "--", "sh", "-c",
                        'echo "$SLURM_PROCID@$SLURMD_NODENAME $1"; echo err >&2', "sh", hostile, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == [f"{rank}: {rank}@127.0.0.{rank // 2 + 1} {hostile}"
                                                  for rank in range(4)]
    assert sorted(result.stderr.splitlines()) == [f"{rank}: err" for rank in range(4)]
    assert not (tmp_path / "PWNED").exists()


def test_one_failed_task_stops_the_others_at_once() -> None:
    # At once: the others' 60 s sleeps are cut short, well within this wait's limit.
    result = launch_cli("--nodes", "3", "--", "sh", "-c", '[ "$SLURM_PROCID" = 1 ] && exit 7; sleep 60', timeout=30)
    assert result.returncode == 7
    assert "hpc-train launch: rank 1 exited with code 7; stopping the 2 task(s) still running" in result.stderr


def test_a_task_killed_by_a_signal_is_named() -> None:
    result = launch_cli("--nodes", "2", "--", "sh", "-c", '[ "$SLURM_PROCID" = 0 ] && kill -9 $$; sleep 60')
    assert result.returncode == 137
    assert "rank 0 was killed by SIGKILL" in result.stderr


def test_a_failed_task_can_leave_the_others_running() -> None:
    # As srun --kill-on-bad-exit=0 for a parameter-server job, whose chief carries on without a lost worker.
    result = launch_cli("--nodes", "3", "--kill-on-bad-exit", "0", "--", "sh", "-c",
                        '[ "$SLURM_PROCID" = 1 ] && exit 7; sleep 1; echo "rank $SLURM_PROCID done"')
    assert result.returncode == 7
    assert "hpc-train launch: rank 1 exited with code 7; keeping the 2 task(s) still running" in result.stderr
    assert sorted(line for line in result.stdout.splitlines() if "done" in line) == ["0: rank 0 done",
                                                                                   "2: rank 2 done"]


def signal_recorder(tmp_path: Path) -> list[str]:
    """A task that writes each USR1/USR2/TERM it gets to a file of its rank, and exits 0 after TERM."""
    return ["sh", "-c", f'trap "echo USR1 >> {tmp_path}/$SLURM_PROCID" USR1; '
                        f'trap "echo USR2 >> {tmp_path}/$SLURM_PROCID" USR2; '
                        f'trap "echo TERM >> {tmp_path}/$SLURM_PROCID; exit 0" TERM; '
                        f'touch {tmp_path}/ready-$SLURM_PROCID; while :; do sleep 0.1; done']


def started(tmp_path: Path, tasks: int) -> subprocess.Popen[str]:
    launcher = subprocess.Popen([sys.executable, "-m", "hpc_train", "launch", "--nodes", str(tasks), "--",
                                 *signal_recorder(tmp_path)], env=without_slurm(), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while len(list(tmp_path.glob("ready-*"))) < tasks and time.monotonic() < deadline:
        time.sleep(0.1)
    return launcher


def recorded_by_every_rank(tmp_path: Path, tasks: int, name: str, timeout: float = 20) -> None:
    """Wait until every rank has written the signal's name (signal_recorder)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(name in ((tmp_path / str(rank)).read_text() if (tmp_path / str(rank)).exists() else "")
               for rank in range(tasks)):
            return
        time.sleep(0.05)


def test_usr1_and_usr2_are_passed_on_to_every_task_and_term_stops_them(tmp_path: Path) -> None:
    launcher = started(tmp_path, 2)
    for signum, name in ((signal.SIGUSR1, "USR1"), (signal.SIGUSR2, "USR2")):
        launcher.send_signal(signum)
        recorded_by_every_rank(tmp_path, 2, name)  # then the next: a loaded machine may take its time
    launcher.send_signal(signal.SIGTERM)
    _, err = launcher.communicate(timeout=30)
    assert launcher.returncode == 143
    assert "hpc-train launch: terminated: stopping every task" in err
    for rank in range(2):
        assert (tmp_path / str(rank)).read_text().split() == ["USR1", "USR2", "TERM"]


def test_a_checkpointed_stop_is_told_apart_from_a_failure() -> None:
    result = launch_cli("--nodes", "1", "--", "sh", "-c", "exit 75")
    assert result.returncode == 75
    assert "rank 0 stopped after saving a checkpoint (exit code 75)" in result.stderr


def test_a_missing_command_is_one_line() -> None:
    result = launch_cli("--nodes", "1", "--", "no-such-program-xyz")
    assert result.returncode == 2
    assert result.stderr.strip() == ("hpc-train launch: error: cannot run 'no-such-program-xyz': No such file or "
                                     "directory; check the command after --")


@pytest.mark.tensorflow
@pytest.mark.parametrize("script, expect", [
    ("mnist_2node.sh", ["multiworker: 2 workers", "rank 1 is worker 1 at 127.0.0.2:"]),
    # (The scripts' fallback to the mock srun is tested by the first; the ps script's job itself on a real Slurm.)
    pytest.param("mnist_ps.sh", ["parameter_server: 1 chief, 1 ps, 2 workers", "rank 1 is ps 0 at 127.0.0.1:",
                                 "[ps 0] the chief at 127.0.0.1:"],
                 marks=pytest.mark.mock_twin("tests/e2e/test_trainer_jobs.py::"
                                             "test_a_parameter_server_job_is_retried_without_its_lost_ps_then_outlives_a_lost_worker")),
])
def test_the_job_scripts_run_without_slurm(script: str, expect: list[str], tmp_path: Path) -> None:
    env = {**without_slurm(), "HPC_TRAIN_HOME": str(ROOT), "HPC_TRAIN_DATA_DIR": str(shared_mnist()),
           "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    result = subprocess.run(["bash", str(ROOT / "slurm" / script), "--set", "epochs=2"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    for text in expect:
        assert text in output
    [run] = list((tmp_path / "runs").iterdir())
    assert json.loads((run / "metrics.json").read_text())["totals"]["final_val_accuracy"] >= 0.9


def test_nodes_9_and_10_keep_rank_order_without_slurm() -> None:
    result = launch_cli("--nodes", "2", "--nodelist", "127.0.0.[9-10]", "--", sys.executable, "-m", "hpc_train",
                        "bootstrap", "--print")
    assert result.returncode == 0, result.stderr
    configs = {int(line.split(": ", 1)[0]): json.loads(line.split(": ", 1)[1]) for line in result.stdout.splitlines()}
    assert [address.split(":")[0] for address in configs[0]["cluster"]["worker"]] == ["127.0.0.9", "127.0.0.10"]
    assert configs[1]["task"] == {"type": "worker", "index": 1}


@pytest.mark.tensorflow
@pytest.mark.mock_twin("tests/e2e/test_trainer_jobs.py::test_two_jobs_sharing_nodes_do_not_collide_on_ports")
def test_two_jobs_at_once_without_slurm_do_not_collide(tmp_path: Path) -> None:
    env = {**without_slurm(), "HPC_TRAIN_HOME": str(ROOT), "HPC_TRAIN_DATA_DIR": str(shared_mnist()),
           "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    runs = []
    for index in range(2):
        (tmp_path / str(index)).mkdir()
        runs.append(subprocess.Popen(["bash", str(ROOT / "slurm" / "mnist_2node.sh"), "--set", "epochs=1",
                                      "--set", "train_images=2000"], cwd=tmp_path / str(index), env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = [run.communicate(timeout=300)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs[0][-2000:] + outputs[1][-2000:]
    ports = [set(re.findall(r"rank \d is worker \d at [\d.]+:(\d+)", output)) for output in outputs]
    assert len(ports[0]) == 2 and len(ports[1]) == 2 and not ports[0] & ports[1]


def test_a_random_job_id_is_chosen_where_its_ports_are_free(monkeypatch: pytest.MonkeyPatch) -> None:
    import random
    import socket

    from hpc_train.bootstrap.ports import assign_ports

    # No port is assumed free: the busy id is the first whose port this test could bind and hold.
    with socket.socket() as holder:
        for busy_id in range(901_234, 901_334):
            busy_port = assign_ports([0, 1], job_id=busy_id).ports[1]
            try:
                holder.bind(("0.0.0.0", busy_port))
                break
            except OSError:
                continue
        else:
            pytest.fail("every port tried for the busy id is taken on this machine")
        holder.listen()
        later_ids = range(busy_id + 1, busy_id + 50)  # neighbouring ids: disjoint windows, most of them free
        offered = iter([busy_id, *later_ids])
        monkeypatch.setattr(random, "randrange", lambda *args: next(offered))
        chosen = Step.make(1, 2).job_id
        assert chosen in later_ids  # the busy id was offered first, and passed over
        assert busy_port not in assign_ports([0, 1], job_id=chosen).ports


# GPUs on one machine: bound as Slurm binds --gpus-per-node, split as the bootstrap splits them.

def gpu_values(step: Step, ids: tuple[str, ...]) -> list[str]:
    environments, _ = gpu_environments(step, MachineGpus(ids, "a test's list"))
    return [env.get("CUDA_VISIBLE_DEVICES", "(unset)") for env in environments]


def test_each_task_gets_its_own_gpus_and_each_node_its_own_run_of_them() -> None:
    four = ("0", "1", "2", "3")
    assert gpu_values(Step(("a", "b"), 2, gpus_per_node=2), four) == ["0", "1", "2", "3"]
    assert gpu_values(Step(("a", "b"), 2, Distribution.CYCLIC, gpus_per_node=2), four) == ["0", "2", "1", "3"]
    assert gpu_values(Step(("a", "b"), 1, gpus_per_node=2), four) == ["0,1", "2,3"]  # one task mirrors its node's
    assert gpu_values(Step(("a",), 2, gpus_per_node=2), ("3", "1", "0")) == ["3", "1"]  # the shell's order
    environments, _ = gpu_environments(Step(("a", "b"), 2, gpus_per_node=2), MachineGpus(four, ""))
    assert {(env["SLURM_GPUS_ON_NODE"], env["SLURM_JOB_GPUS"], env["SLURM_STEP_GPUS"]) for env in environments} == {
        ("2", "0,1", "0,1"), ("2", "2,3", "2,3")}


def test_parameter_servers_and_the_chief_get_no_gpu() -> None:
    step = Step(("a", "b"), 2, gpus_per_node=2, strategy="parameter_server", num_ps=1)
    assert gpu_values(step, ("0", "1", "2", "3")) == ["", "", "2", "3"]
    step = Step(("a",), 4, gpus_per_node=4, strategy="parameter_server", num_ps=1)
    assert gpu_values(step, ("0", "1", "2", "3")) == ["", "", "0,1", "2,3"]  # as the bootstrap splits it


def test_without_gpus_per_node_the_tasks_see_no_gpu_and_are_told() -> None:
    environments, notes = gpu_environments(Step(("a",), 2), MachineGpus(("0", "1"), ""))
    assert environments == [{"CUDA_VISIBLE_DEVICES": ""}] * 2
    assert notes == ("no --gpus-per-node: the tasks see none of this machine's 2 GPUs, as under Slurm without "
                     "--gpus; --gpus-per-node G gives each node G of them",)
    assert gpu_environments(Step(("a",), 2), MachineGpus((), "no nvidia-smi on PATH")) == ([{}, {}], ())


@pytest.mark.parametrize("step, ids, message", [
    (Step(("a",), 2, gpus_per_node=2), ("0",),
     "--gpus-per-node 2: this machine has 1 GPU (nvidia-smi -L lists 1); ask for at most 1"),
    (Step(("a", "b"), 1, gpus_per_node=2), ("0", "1", "2"),
     "--gpus-per-node 2 on each of 2 nodes: this machine has 3 GPUs (nvidia-smi -L lists 1); ask for at most 1"),
    (Step(("a", "b"), 1, gpus_per_node=1), ("0",), "start at most 1 node with --gpus-per-node 1"),
    (Step(("a",), 1, gpus_per_node=1), (), "this machine has 0 GPUs (nvidia-smi -L lists 1); drop --gpus-per-node"),
    (Step(("a",), 2, gpus_per_node=1), ("0", "1"),  # the bootstrap's own refusal
     "a runs 2 GPU tasks but has 1 GPU (--gpus-per-node 1); start at most one task per GPU"),
])
def test_more_gpus_than_the_machine_has_is_refused(step: Step, ids: tuple[str, ...], message: str) -> None:
    with pytest.raises(HpcTrainError, match=re.escape(message)):
        gpu_environments(step, MachineGpus(ids, "nvidia-smi -L lists 1"))


def test_the_bootstrap_keeps_the_share_the_launcher_gave() -> None:
    step = Step(("n1", "n2"), 2, job_id=77, gpus_per_node=2)
    bound, _ = gpu_environments(step, MachineGpus(("0", "1", "2", "3"), ""))
    for rank, (env, gpus) in enumerate(zip(rank_environments(step, {}), bound)):
        assert compute_layout({**env, **gpus}).me.devices in (None, (gpus["CUDA_VISIBLE_DEVICES"],))


PRINT_GPUS = [sys.executable, "-c", "import os; print(os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)'))"]


def test_launched_tasks_see_disjoint_gpus_of_the_machine(tmp_path: Path) -> None:
    path = install_nvidia_smi(tmp_path / "bin", 4)
    result = launch_cli("--nodes", "2", "--ntasks-per-node", "2", "--gpus-per-node", "2", "--", *PRINT_GPUS,
                        env={"PATH": path})
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["0: 0", "1: 1", "2: 2", "3: 3"]
    narrowed = launch_cli("--nodes", "1", "--ntasks-per-node", "2", "--gpus-per-node", "2", "--", *PRINT_GPUS,
                          env={"PATH": path, "CUDA_VISIBLE_DEVICES": f"3,{uuid(1)}"})
    assert sorted(narrowed.stdout.splitlines()) == ["0: 3", f"1: {uuid(1)}"], narrowed.stderr
    hidden = launch_cli("--nodes", "1", "--", *PRINT_GPUS, env={"PATH": path})
    assert hidden.stdout == "0: \n" and "hpc-train launch: note: no --gpus-per-node" in hidden.stderr
    plain = launch_cli("--nodes", "1", "--", *PRINT_GPUS, env={"PATH": path_without_nvidia_smi()})
    assert (plain.stdout, plain.stderr) == ("0: (unset)\n", "")  # no GPU here: nothing to hide


def test_more_gpus_than_the_machine_has_is_one_line_and_starts_no_task(tmp_path: Path) -> None:
    path = install_nvidia_smi(tmp_path / "bin", 1)
    result = launch_cli("--nodes", "1", "--ntasks-per-node", "2", "--gpus-per-node", "2", "--", "touch", "RAN",
                        env={"PATH": path}, cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", (
        "hpc-train launch: error: --gpus-per-node 2: this machine has 1 GPU (nvidia-smi -L lists 1); "
        "ask for at most 1\n"))
    assert not (tmp_path / "RAN").exists()


def test_a_killed_ranks_own_tmpdir_is_removed_by_the_launcher_as_by_srun_task_epilog(tmp_path: Path) -> None:
    made = 'mkdir "$TMPDIR/hpc-train-$SLURM_JOB_ID-0-0-$SLURM_PROCID" && kill -9 $$'
    result = launch_cli("--nodes", "2", "--", "sh", "-c", made, env={"TMPDIR": str(tmp_path)})
    assert result.returncode == 137, result.stderr
    assert os.listdir(tmp_path) == []


SHOW_SECRET = ("import os, stat; path = os.environ['HPC_TRAIN_SECRET_FILE']; "
               "print(path, len(open(path).read().strip()), oct(stat.S_IMODE(os.stat(path).st_mode)))")


def test_launch_gives_its_tasks_a_check_in_secret_of_its_own_and_removes_it_after(tmp_path: Path) -> None:
    """(issue 46, 5) `launch` ran its ranks without a check-in secret: anyone could join their rendezvous."""
    result = launch_cli("--nodes", "1", "--ntasks-per-node", "2", "--", sys.executable, "-c", SHOW_SECRET,
                        env=without_slurm())
    assert result.returncode == 0, result.stderr
    said = sorted(line.split(": ", 1)[1].split() for line in result.stdout.splitlines())
    assert len(said) == 2 and said[0] == said[1], said  # one secret for every task
    path, length, mode = said[0]
    assert (length, mode) == ("64", "0o600") and not Path(path).exists()  # removed with the ranks
    given = tmp_path / "mine.secret"
    given.write_text("x" * 64 + "\n")
    kept = launch_cli("--nodes", "1", "--", sys.executable, "-c", SHOW_SECRET,
                      env={**without_slurm(), "HPC_TRAIN_SECRET_FILE": str(given)})
    assert kept.stdout.split(": ", 1)[1].split()[0] == str(given) and given.exists()  # one set already: kept
