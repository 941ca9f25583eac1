"""`hpc-train bootstrap`: printing, exec, and one-line errors with exit 2."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from hpc_train.cli import main
from tests.fake_nvidia import install_nvidia_smi, path_without_nvidia_smi, uuid
from tests.fake_slurm import step_env, without_slurm
from tests.net import free_port_block

TWO_BY_TWO = step_env("node[1-2]", "2(x2)", 2, hosts_by_rank=["node1", "node1", "node2", "node2"])


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The real command in a child process, with only the given Slurm variables."""
    full_env = {**without_slurm(), **(env or {})}
    return subprocess.run([sys.executable, "-m", "hpc_train", *args], env=full_env, cwd=cwd,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def step(monkeypatch: pytest.MonkeyPatch, clean_environ: None) -> None:
    for name, value in TWO_BY_TWO.items():
        monkeypatch.setenv(name, value)


def test_print_shows_this_tasks_tf_config(step: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bootstrap", "--print", "--port-base", "30000"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "cluster": {"worker": ["node1:30000", "node1:30001", "node2:30002", "node2:30003"]},
        "task": {"type": "worker", "index": 2}, "rpc_layer": "grpc"}


def test_all_shows_every_task_and_marks_this_one(step: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bootstrap", "--all", "--strategy", "parameter_server", "--port-base", "30000"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "# parameter_server, 4 tasks, ports: --port-base 30000"
    rows = [line.split() for line in lines[2:]]
    assert rows == [["0", "chief", "0", "node1", "30000", "0", "0", "none"],
                    ["1", "ps", "0", "node1", "30001", "0", "1", "none"],
                    ["*", "2", "worker", "0", "node2", "30002", "1", "0", "(as", "set)"],
                    ["3", "worker", "1", "node2", "30003", "1", "1", "(as", "set)"]]


def test_the_batch_shell_note_goes_to_stderr(clean_environ: None, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node1")
    monkeypatch.setenv("SLURM_TASKS_PER_NODE", "1")
    monkeypatch.setenv("SLURM_JOB_ID", "5")
    assert main(["bootstrap", "--print"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["task"] == {"type": "worker", "index": 0}
    assert "note: not inside a job step" in captured.err


def test_exec_runs_the_command_with_tf_config_and_gpus_exported() -> None:
    env = {**TWO_BY_TWO, "SLURM_GPUS_ON_NODE": "4", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    show = "import json, os; print(json.dumps([json.loads(os.environ['TF_CONFIG']), os.environ['CUDA_VISIBLE_DEVICES']]))"
    result = run_cli("bootstrap", "--port-base", str(free_port_block(4)), "--", sys.executable, "-c", show, env=env)
    assert result.returncode == 0, result.stderr
    config, devices = json.loads(result.stdout)
    assert config["task"] == {"type": "worker", "index": 2}
    assert devices == "0,1"


def test_exec_passes_hostile_arguments_verbatim_through_a_real_shell(tmp_path: Path) -> None:
    hostile = ["$(touch PWNED)", "x'; touch PWNED #", "a b", '"; touch PWNED; "', "`touch PWNED`"]
    # The user's shell hands the arguments over; no later step may evaluate them again.
    script = f'exec {sys.executable} -m hpc_train bootstrap --port-base {free_port_block(4)} -- printf "%s\\n" "$@"'
    result = subprocess.run(["bash", "-c", script, "bash", *hostile], env={**without_slurm(), **TWO_BY_TWO},
                            cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == hostile
    assert not (tmp_path / "PWNED").exists()


def test_a_missing_command_is_one_line_and_127() -> None:
    result = run_cli("bootstrap", "--port-base", str(free_port_block(4)), "--", "no-such-command-xyz", env=TWO_BY_TWO)
    assert result.returncode == 127
    task_line, *errors = result.stderr.strip().splitlines()
    assert task_line.startswith("hpc-train bootstrap: rank 2 is worker 2 at node2:")
    assert errors == ["hpc-train bootstrap: error: command not found: 'no-such-command-xyz' (check the command after --)"]


def test_a_taken_port_fails_fast_instead_of_colliding() -> None:
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        # Rank 2 of the step gets port-base + 2.
        result = run_cli("bootstrap", "--port-base", str(taken - 2), "--", "true", env=TWO_BY_TWO)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"hpc-train bootstrap: error: port {taken} on node2 is already in use (another job on this node?); "
        "pass --port-base with a free range, or start the step with srun --resv-ports"]


def with_var(**changes: str | None) -> dict[str, str]:
    env = dict(TWO_BY_TWO)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


# Each bad input: (environment, extra arguments, words the one-line message must contain).
BAD_INPUTS = {
    "unbalanced node list": (with_var(SLURM_STEP_NODELIST="node[1-"), [], ["SLURM_STEP_NODELIST='node[1-'", "unbalanced"]),
    "reversed range": (with_var(SLURM_STEP_NODELIST="node[3-1]"), [], ["SLURM_STEP_NODELIST='node[3-1]'", "start > stop"]),
    "empty node list": (with_var(SLURM_STEP_NODELIST=""), [], ["SLURM_STEP_NODELIST=''", "empty"]),
    "duplicate node": (with_var(SLURM_STEP_NODELIST="node1,node1"), [], ["'node1' is listed twice"]),
    "counts do not sum to the task count": (with_var(SLURM_STEP_NUM_TASKS="5"), [],
                                            ["SLURM_STEP_NUM_TASKS='5'", "adds up to 4"]),
    "node list and counts differ in length": (with_var(SLURM_STEP_TASKS_PER_NODE="2(x3)"), [],
                                              ["SLURM_STEP_TASKS_PER_NODE='2(x3)'", "3 nodes", "names 2"]),
    "bad tasks per node": (with_var(SLURM_STEP_TASKS_PER_NODE="two"), [], ["SLURM_STEP_TASKS_PER_NODE='two'"]),
    "zero tasks on a node": (with_var(SLURM_STEP_TASKS_PER_NODE="2,0"), [], ["SLURM_STEP_TASKS_PER_NODE='2,0'"]),
    "rank too large": (with_var(SLURM_PROCID="4"), [], ["SLURM_PROCID='4'", "out of range", "0-3"]),
    "rank negative": (with_var(SLURM_PROCID="-1"), [], ["SLURM_PROCID='-1'", "whole number"]),
    "rank not a number": (with_var(SLURM_PROCID="one"), [], ["SLURM_PROCID='one'", "whole number"]),
    "rank missing in a step": (with_var(SLURM_PROCID=None), [], ["SLURM_PROCID is not set", "srun"]),
    "too many ps": (TWO_BY_TWO, ["--strategy", "parameter_server", "--num-ps", "3"],
                    ["--num-ps 3", "at least 5 tasks", "has 4"]),
    "no ps": (TWO_BY_TWO, ["--strategy", "parameter_server", "--num-ps", "0"], ["--num-ps 0"]),
    "num-ps without parameter_server": (TWO_BY_TWO, ["--num-ps", "2"], ["--num-ps applies to"]),
    "unknown strategy": (TWO_BY_TWO, ["--strategy", "allreduce"], ["invalid choice: 'allreduce'", "multiworker"]),
    "unsupported distribution": (with_var(SLURM_DISTRIBUTION="plane"), [], ["SLURM_DISTRIBUTION='plane'", "-m block"]),
    "arbitrary distribution": (with_var(SLURM_DISTRIBUTION="arbitrary"), [], ["SLURM_DISTRIBUTION='arbitrary'"]),
    "placement Slurm contradicts": (with_var(SLURM_NODEID="0"), [], ["SLURM_NODEID='0'", "node2"]),
    "no Slurm at all": ({}, [], ["not inside a Slurm step? run it under srun"]),
    "more GPU tasks than GPUs": (with_var(SLURM_GPUS_ON_NODE="1"), [], ["node1 runs 2 GPU tasks but has 1 GPU ("]),
    "bad GPU count": (with_var(SLURM_GPUS_ON_NODE="many"), [], ["SLURM_GPUS_ON_NODE='many'"]),
    "too few reserved ports": (with_var(SLURM_STEP_RESV_PORTS="12000"), ["--all"],
                               ["SLURM_STEP_RESV_PORTS='12000'", "--resv-ports=2"]),
    "bad reserved ports": (with_var(SLURM_STEP_RESV_PORTS="12000-x"), [], ["SLURM_STEP_RESV_PORTS='12000-x'"]),
    "privileged port base": (TWO_BY_TWO, ["--port-base", "80"], ["--port-base 80"]),
    "no job id and no port base": (with_var(SLURM_JOB_ID=None), [], ["SLURM_JOB_ID is not set", "--port-base"]),
    "nothing to run": (TWO_BY_TWO, None, ["nothing to run"]),
}


@pytest.mark.parametrize("name", BAD_INPUTS)
def test_bad_input_is_one_line_and_exit_2(name: str, clean_environ: None, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    env, extra, words = BAD_INPUTS[name]
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    args = ["bootstrap", *(extra if extra is not None else [])]
    if extra is not None and "--all" not in extra:
        args.append("--print")
    try:
        code = main(args)
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("hpc-train bootstrap: error: ")
    for word in words:
        assert word in lines[0]


def test_errors_of_the_installed_command_carry_no_traceback() -> None:
    result = run_cli("bootstrap", "--print", env=with_var(SLURM_STEP_NODELIST="node[1-"))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_help_and_bootstrap_never_import_tensorflow() -> None:
    probe = ("import sys, contextlib, io\n"
             "from hpc_train.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             "    main(['bootstrap', '--print'])\n"
             "    try:\n"
             "        main(['--help'])\n"
             "    except SystemExit:\n"
             "        pass\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'tf_keras')))\n")
    result = subprocess.run([sys.executable, "-c", probe], env={**without_slurm(), **TWO_BY_TWO},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_rank_bound_to_a_gpu_the_node_lacks_says_so_before_the_command_starts(tmp_path: Path) -> None:
    env = {**step_env("node1", "2", 1, hosts_by_rank=["node1", "node1"]), "SLURM_GPUS_ON_NODE": "2",
           "CUDA_VISIBLE_DEVICES": "0,5"}  # rank 1's share: GPU 5, which nvidia-smi does not list here
    command = ["--port-base", str(free_port_block(2)), "--", sys.executable, "-c",
               "import sys; print('RAN', file=sys.stderr)"]
    result = run_cli("bootstrap", *command, env={**env, "PATH": install_nvidia_smi(tmp_path, 2)})
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    warning = (f"hpc-train bootstrap: warning: rank 1 is bound to GPU 5 (CUDA_VISIBLE_DEVICES=5) but this node has "
               f"2 GPUs: 0 {uuid(0)}, 1 {uuid(1)} (nvidia-smi -L); CUDA skips it and every GPU named after it")
    assert lines.count(warning) == 1 and lines.index(warning) < lines.index("RAN"), lines
    for path in (install_nvidia_smi(tmp_path, 6), path_without_nvidia_smi()):  # the GPU is there; no nvidia-smi
        quiet = run_cli("bootstrap", *command, env={**env, "PATH": path})
        assert "warning" not in quiet.stderr and quiet.stderr.endswith("RAN\n"), quiet.stderr
