"""TensorFlow's CPU-node start-up noise filtered out of a Slurm task's stderr; every other byte kept."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from hpc_train.bootstrap.stderr_filter import SHOW_VARIABLE, is_noise, wanted
from tests.fake_slurm import without_slurm

# As TensorFlow 2.21 printed them on this machine (a task bound to a fake GPU, no driver).
NOISE = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795426515.986455    4268 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will "
    "not be used.",
    "E0000 00:00:1795426520.154228    4268 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed "
    "call to cuInit: UNKNOWN ERROR (303)",
    "I0000 00:00:1795426516.042118    4268 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use "
    "available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow with the appropriate "
    "compiler flags.",
    "I0000 00:00:1795413871.783906    3549 port.cc:153] oneDNN custom operations are on. You may see slightly "
    "different numerical results due to floating-point round-off errors from different computation orders.",
    # A multi-worker start (TensorFlow 2.21, hpc-train submit --local --nodes 2).
    "I0000 00:00:1795569731.563726    9621 grpc_server_lib.cc:467] Started server with target: grpc://127.0.0.2:26553",
    "I0000 00:00:1795569731.560997    9617 coordination_service.cc:221] Initializing CoordinationService",
    "I0000 00:00:1795569731.655367   11149 coordination_service.h:529] /job:worker/replica:0/task:0 has connected to "
    "coordination service. Incarnation: 9169136583574792542",
    "I0000 00:00:1795569731.655665   11149 coordination_service.cc:502] Waiting for 1/2 tasks to connect.",
    "I0000 00:00:1795569731.655698   11149 coordination_service.cc:505] Example stragglers:",
    "/job:worker/replica:0/task:1",
    "I0000 00:00:1795569731.655917    9617 coordination_service_agent.cc:245] Coordination agent has successfully "
    "connected.",
    "I0000 00:00:1795569731.659248   11148 coordination_service.cc:1472] Barrier(WaitForAllTasks::14242593598648495677"
    "::0) has passed with status: OK",
    "I0000 00:00:1795569732.221079    9621 generator_dataset_op.cc:213] Memory patch applied: M_TRIM_THRESHOLD=128 kb "
    "was set.",
    "W0000 00:00:1795569732.230344    9621 dataset.cc:997] Input of GeneratorDatasetOp::Dataset will not be optimized "
    "because the dataset does not implement the AsGraphDefInternal() method needed to apply optimizations.",
]
KEPT = [
    "hpc-train [worker 1]: stopped by SIGTERM after epoch 1 (step 62)",
    "E0000 00:00:1795413875.011526    3549 grpc_server_lib.cc:90] failed to bind 0.0.0.0:20123",
    "W0000 00:00:1795413875.015156    3548 cuda_platform.cc:52] something new about CUDA",
    "Traceback (most recent call last):",
    "",
    # The coordination service when something is wrong: never hidden.
    "E0000 00:00:1795569731.659248   11148 coordination_service.cc:1472] Barrier(WaitForAllTasks::1::0) has passed "
    "with status: DEADLINE_EXCEEDED",
    "I0000 00:00:1795569731.655698   11149 coordination_service.cc:505] /job:worker/replica:0/task:1 has disconnected",
    "/job:worker/replica:0/task:1 is lost",
]


@pytest.mark.parametrize("line", NOISE)
def test_known_start_up_noise_is_recognised(line: str) -> None:
    assert is_noise(line) and is_noise(line + "\n")


@pytest.mark.parametrize("line", KEPT)
def test_anything_else_is_kept(line: str) -> None:
    assert not is_noise(line)


def test_every_run_is_filtered_unless_asked_to_show_or_too_late() -> None:
    assert wanted({"SLURM_PROCID": "0"}, tensorflow_imported=False)
    assert wanted({}, tensorflow_imported=False)  # a plain hpc-train train too (issue 27, 9)
    assert not wanted({"SLURM_PROCID": "0", SHOW_VARIABLE: "1"}, tensorflow_imported=False)
    assert not wanted({SHOW_VARIABLE: "1"}, tensorflow_imported=False)
    assert not wanted({"SLURM_PROCID": "0"}, tensorflow_imported=True)


TASK = textwrap.dedent("""
    import os, subprocess, sys
    from hpc_train.bootstrap.stderr_filter import filter_stderr
    filter_stderr()
    lines = sys.argv[1].split("|")
    os.write(2, ("\\n".join(lines) + "\\n").encode())
    subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('from a child\\\\n')"])
    sys.stderr.write("last words, no newline")
    sys.stderr.flush()
    os.kill(os.getpid(), 9)  # dies as a killed task does: the filter still passes on what it wrote
""")


@pytest.mark.parametrize("show", ["", "1"])
def test_a_killed_task_loses_nothing_but_the_noise(show: str) -> None:
    env = {**without_slurm(), "SLURM_PROCID": "0", SHOW_VARIABLE: show}
    result = subprocess.run([sys.executable, "-c", TASK, "|".join(NOISE + KEPT[:3])], env=env,
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == -9
    shown = result.stderr.splitlines()
    expected = [*([] if not show else NOISE), *KEPT[:3], "from a child", "last words, no newline"]
    assert shown == expected


EXITING = textwrap.dedent("""
    import os, sys
    from hpc_train.bootstrap.stderr_filter import drain, filter_stderr
    filter_stderr()
    for line in range(int(sys.argv[1])):
        os.write(2, f"line {line} of the task's stderr\\n".encode())
    os.write(2, b"the traceback's last line\\n")
    if sys.argv[2] == "os._exit":
        drain()
        os._exit(3)
    sys.exit(3)  # atexit drains
""")


@pytest.mark.parametrize("how", ["os._exit", "sys.exit"])
def test_the_filter_has_written_everything_before_the_task_exits(how: str) -> None:
    # As slurmstepd does under proctrack/cgroup: the moment the task exits, every process left in the step
    # (the filter among them) is killed. Whatever the filter had not written by then would be lost.
    lines = 20_000  # about 600 KB: many pipe buffers' worth, still being copied when the task is done writing
    env = {**without_slurm(), "SLURM_PROCID": "0"}
    task = subprocess.Popen([sys.executable, "-c", EXITING, str(lines), how], env=env, stderr=subprocess.PIPE,
                            start_new_session=True)
    stderr: list[bytes] = []

    def read_slowly() -> None:  # as a busy log file system would: the filter is behind when the task is done
        while chunk := os.read(task.stderr.fileno(), 4096):  # type: ignore[union-attr]
            stderr.append(chunk)
            time.sleep(0.002)

    reader = threading.Thread(target=read_slowly)
    reader.start()
    assert task.wait(timeout=60) == 3
    try:
        os.killpg(task.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the filter had finished already
    reader.join(timeout=30)
    shown = b"".join(stderr).decode().splitlines()
    assert len(shown) == lines + 1 and shown[-1] == "the traceback's last line"


FILTER_DIES = textwrap.dedent("""
    import os, signal, sys, time
    from hpc_train.bootstrap import stderr_filter
    stderr_filter.filter_stderr()
    os.write(2, b"before the filter died\\n")
    time.sleep(0.5)
    os.kill(stderr_filter._filter.pid, signal.SIGKILL)
    stderr_filter._filter.ended.wait(10)
    os.write(2, b"after the filter died\\n")
    sys.stderr.write("from Python too\\n")
""")


def test_a_filter_that_dies_leaves_the_tasks_stderr_reaching_the_log() -> None:
    result = subprocess.run([sys.executable, "-c", FILTER_DIES], env={**without_slurm(), "SLURM_PROCID": "0"},
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    shown = result.stderr.splitlines()
    assert shown[0] == "before the filter died"
    assert "stopped; this rank's stderr goes to its log unfiltered from here" in shown[1]
    assert shown[2:] == ["after the filter died", "from Python too"]


def test_a_line_still_being_written_is_passed_on_at_once_unless_it_may_be_noise() -> None:
    from hpc_train.bootstrap.stderr_filter import _copy_without_noise

    source, sink = os.pipe()
    into, out = os.pipe()
    copier = threading.Thread(target=_copy_without_noise, args=(source, out, [(re.compile("Attempt"), "hint")]),
                              daemon=True)
    copier.start()
    os.write(sink, b"\r 3/10 [=====>....]")  # a progress bar, no newline yet: it must show now
    assert _read_for(into, 2.0) == b"\r 3/10 [=====>....]"
    os.write(sink, b"\nI0000 00:00:1795426515.986455    4268 cudart_stub.cc:31] Could not find cuda dri")
    assert _read_for(into, 0.3) == b"\n"  # the bar's line ends; the next may be noise: held until its end is read
    os.write(sink, b"vers on your machine, GPU will not be used.\nValueError: Attempt to con")
    os.write(sink, b"vert a value (PerReplica:{})\n")
    os.close(sink)
    copier.join(timeout=10)
    os.close(out)
    assert _read_for(into, 2.0) == b"ValueError: Attempt to convert a value (PerReplica:{})\n"


def _read_for(fd: int, seconds: float) -> bytes:
    """What arrives on `fd` within `seconds` (a non-blocking poll)."""
    os.set_blocking(fd, False)
    got, deadline = b"", time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            time.sleep(0.02)
            continue
        if not chunk:
            break
        got += chunk
    return got


WATCHED = textwrap.dedent("""
    import os, re, sys
    from hpc_train.bootstrap import stderr_filter
    stderr_filter.filter_stderr([(re.compile("reset_states"), "hint: reset_state"), (re.compile("PerReplica"), "hint: fit")])
    os.write(2, b"AttributeError: 'SparseCategoricalAccuracy' object has no attribute 'reset_sta")
    os.write(2, b"tes'\\nthe traceback's last line\\n")
    if sys.argv[1] == "failed":
        stderr_filter.say_failed()
""")


@pytest.mark.parametrize("ending", ["failed", "succeeded"])
def test_after_a_failure_the_filter_ends_the_log_with_the_words_of_the_watched_lines_it_saw(ending: str) -> None:
    result = subprocess.run([sys.executable, "-c", WATCHED, ending], env={**without_slurm(), "SLURM_PROCID": "0"},
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    shown = result.stderr.splitlines()
    assert shown[:2] == ["AttributeError: 'SparseCategoricalAccuracy' object has no attribute 'reset_states'",
                         "the traceback's last line"]
    assert shown[2:] == (["hint: reset_state"] if ending == "failed" else [])  # last, once; never the other's
