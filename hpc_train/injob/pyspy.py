"""A user's command's Python stacks, read by py-spy from outside: the supervisor's answer to the hang watchdog.

The trainer's ranks answer the watchdog's request for stacks themselves (a faulthandler thread,
runs/stacks.py); a user's command has no thread of ours. The supervisor beside it (supervisor.py) answers for
it: py-spy (a dependency from PyPI, a binary next to this Python) dumps every thread of the command's Python
processes, the command and what it started (a launcher's workers, where ptrace allows: below), into the same
`stacks/attempt-A-rank-R.txt`, rewritten as each dump arrives, all within one deadline (DUMPS_SECONDS). A
command that answers for itself (`answer_requests`) is left its own answer. Where py-spy cannot (missing,
ptrace refused, no Python among the processes, out of time) the file says why, in one paragraph, instead of
nothing.

Yama's ptrace_scope 1 (Ubuntu's default) lets a process be read by its ancestors only, and py-spy, the
supervisor's child, is the command's sibling: the command is started naming the supervisor its tracer
(prctl PR_SET_PTRACER), which lets the supervisor and its descendants read it. All of them are the user's own
processes, which the supervisor could end anyway; without Yama the call fails, harmlessly. Yama keeps that
exception to the command's own process (across exec, not fork): under ptrace_scope 1 without CAP_SYS_PTRACE
what the command starts cannot be read, so a wrapper script should `exec python ...`: the paragraph says so
where nothing was read under scope 1, and names the cause that fits under any other scope. (No sitecustomize to make every Python name its tracer: it would shadow the user's own.)
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from hpc_train.runs import stacks

PR_SET_PTRACER = 0x59616D61  # linux/prctl.h: "Yama"
# How long one process's dump may take: py-spy runs --nonblocking (a thread stuck in the kernel, on a file server
# that stopped answering, would never stop for it), so only a stuck read of its own makes it slow.
DUMP_SECONDS = 3.0
# How long all the dumps of one request may take together, after the command's own answer was waited for: the
# request is seen up to stacks.POLL_SECONDS (1 s) late, then 2 s + 6 s (+ REAP_SECONDS): done by 9.5 s, inside the watchdog's 10 s
# (watchdog.STACKS_WAIT_SECONDS), after which the step ends. The file is rewritten after each dump: one cut short
# keeps those before it.
DUMPS_SECONDS = 6.0
# Less than this left, no dump is started: py-spy reads a small idle process in about 0.01 s, but a large one, or
# one whose files sit on a slow file server, takes far longer; half a second is worth a try.
SHORTEST_DUMP_SECONDS = 0.5
# How long a py-spy killed for being slow is waited for: one stuck in the kernel would never end (counted in the 9 s).
REAP_SECONDS = 0.5
# The command's processes dumped at most (the command first, then what it started, oldest first).
MOST_PROCESSES = 4
# How long a command that answers the request itself is given before py-spy answers for it.
OWN_ANSWER_SECONDS = 2.0
YAMA_SCOPE = Path("/proc/sys/kernel/yama/ptrace_scope")
# py-spy's words for a refused ptrace, lower-cased: its own "Permission Denied: Try running again with elevated
# permissions ...", or the OS error's ("Operation not permitted (os error 1)").
REFUSED = ("permission denied", "operation not permitted", "os error 1)", "os error 13)")
# py-spy's advice after a refusal (sudo): no fix inside a job, left out of the paragraph.
HINT = "try running again"
# How a dump's error begins when time ran out: py-spy's own, or none started.
SLOW, SKIPPED = "py-spy took over", "not read: out of time"


def allow_parent_to_trace() -> Callable[[], None]:
    """A preexec step for the command: its parent (the supervisor) and its parent's children may trace it. The
    C function is found here, before the fork; the child only calls it."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: no Yama to ask
        return lambda: None

    def allow() -> None:
        prctl(PR_SET_PTRACER, os.getppid(), 0, 0, 0)  # (-1 without Yama: nothing to allow)
    return allow


def py_spy(environ: Mapping[str, str]) -> str | None:
    """py-spy's path: beside this Python (a venv's bin/, as pip installs it), or in an image the job's own (its
    scripts folder, mounted), else on PATH; None without one."""
    from hpc_train.container.runtime import JOB_BIN

    for folder in (Path(sys.executable).parent, *((Path(environ[JOB_BIN]),) if environ.get(JOB_BIN) else ())):
        beside = folder / "py-spy"  # (not resolved: a venv's python is a link out of it)
        if beside.is_file() and os.access(beside, os.X_OK):
            return str(beside)
    return shutil.which("py-spy", path=environ.get("PATH"))


def descendants(pid: int, parents: Mapping[int, int]) -> list[int]:
    """`pid` and the processes under it, each before its children, oldest (lowest pid) first (pure)."""
    order, queue = [], [pid]
    while queue:
        current = queue.pop(0)
        order.append(current)
        queue += sorted(child for child, parent in parents.items() if parent == current)
    return order


def process_parents() -> dict[int, int]:
    """Every process's parent, from /proc."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:  # "PID (NAME) STATE PPID ...": the name may hold spaces and parentheses
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile
    return parents


def ptrace_scope() -> int | None:
    """Yama's ptrace_scope, None without Yama."""
    try:
        return int(YAMA_SCOPE.read_text().strip())
    except (OSError, ValueError):
        return None


def refused(text: str) -> bool:
    """Whether py-spy's error says ptrace was refused (pure)."""
    return any(word in text.lower() for word in REFUSED)


def without_hint(text: str) -> str:
    """py-spy's error without its advice to rerun it with sudo (pure)."""
    at = text.lower().find(HINT)
    return text if at < 0 else text[:at].rstrip(" :;,.")


def why_not(pid: int, program: str | None, errors: Mapping[int, str], scope: int | None) -> str:
    """The paragraph a rank's stacks file holds when py-spy read none of its command's processes (pure)."""
    start = f"No Python stacks for this rank's command (pid {pid}): "
    yourself = ("A Python command can answer the request itself: from hpc_train.runs.stacks import "
                "answer_requests; answer_requests(os.environ[\"HPC_TRAIN_RUN_DIR\"]).")
    if program is None:
        return (start + "py-spy is not installed beside this Python nor on PATH; install it (pip install py-spy, "
                "a dependency of hpc-train) where the job runs. " + yourself)
    said = "; ".join(f"pid {process}: {without_hint(text)}" for process, text in errors.items())
    if any(refused(text) for text in errors.values()):
        return (start + f"py-spy could not attach, ptrace was refused ({said}); {yama_says(scope)}. "
                + (started_refused(pid, errors, scope) or let_it(scope)) + yourself)
    if out_of_time(errors):
        return (start + out_of_time(errors) + "A file server that stopped answering, where the command's files "
                "are, can stall py-spy as it stalls the command. " + yourself)
    return (start + f"py-spy read no Python process among its {len(errors)} ({said}): is the command Python? "
            + yourself)


CAPABILITY = "give the job CAP_SYS_PTRACE (in a container, docker run --cap-add SYS_PTRACE)"


def let_it(scope: int | None) -> str:
    """What lets py-spy read a process it was refused, under this Yama scope (pure)."""
    if scope == 1:
        return (f"To let it: {CAPABILITY}; without it only the command's own process can be read, so a wrapper "
                "script should `exec python ...`. ")
    if scope in (2, 3):
        return (f"To let it: {CAPABILITY}, or ask the nodes' admins for Yama's ptrace_scope 1 "
                "(scope 3 holds until a reboot). ")
    return (f"This refusal is not Yama's: the process may be another user's or not dumpable, or the container's "
            f"seccomp profile may forbid ptrace. To let it: {CAPABILITY}. ")


def yama_says(scope: int | None) -> str:
    """What Yama's ptrace_scope allows py-spy, the supervisor's child (pure)."""
    return {None: "this kernel has no Yama: the job lacks CAP_SYS_PTRACE or its processes may not be traced",
            0: "Yama's ptrace_scope is 0: the job lacks CAP_SYS_PTRACE or its processes may not be traced",
            1: "Yama's ptrace_scope is 1: without CAP_SYS_PTRACE only the command's own process may be read "
               "(the command names the supervisor its tracer)",
            2: "Yama's ptrace_scope is 2: only a process with CAP_SYS_PTRACE may attach",
            3: "Yama's ptrace_scope is 3: no process may attach"}.get(scope, f"Yama's ptrace_scope is {scope}")


def started_refused(pid: int, errors: Mapping[int, str], scope: int | None) -> str:
    """What to do when py-spy was refused the processes the command started under Yama's ptrace_scope 1 (the
    command's exception does not reach them), "" when it was not, or not for that reason (pure)."""
    started = [str(process) for process, text in errors.items() if process != pid and refused(text)]
    if scope != 1 or not started or refused(errors.get(pid, "")):  # its own refused too: not Yama's exception
        return ""
    return (f"py-spy was refused the processes the command started (pid {', '.join(started)}): under Yama's "
            f"ptrace_scope 1 without CAP_SYS_PTRACE only the command's own process (pid {pid}) can be read, as Yama "
            "does not pass the command's exception on to what it starts, so a wrapper script should `exec python "
            "...` (Python then is the command's own process); else give the job CAP_SYS_PTRACE. ")


def others_refused(errors: Mapping[int, str], scope: int | None) -> str:
    """After some dumps: the processes py-spy was refused, what Yama allows, and what gets them read; "" when none
    was (pure). Something was read, so the command is Python itself: advice to exec would not help here."""
    refusals = [str(process) for process, text in errors.items() if refused(text)]
    if not refusals:
        return ""
    return (f"py-spy was refused pid {', '.join(refusals)}: {yama_says(scope)}. To have them read: {CAPABILITY}, "
            "or have those processes answer the request themselves (hpc_train.runs.stacks.answer_requests). ")


def dump_timeout(deadline: float, now: float) -> float | None:
    """How long the next dump may take: DUMP_SECONDS, less as the request's one deadline nears; None when too
    little is left to start one (pure)."""
    left = deadline - now
    return min(DUMP_SECONDS, left) if left >= SHORTEST_DUMP_SECONDS else None


def spy(program: str, pid: int, timeout: float) -> tuple[str, str]:
    """py-spy's dump of one process: (its stacks, "") or ("", why not, its first line)."""
    try:
        spying = subprocess.Popen([program, "dump", "--pid", str(pid), "--full-filenames", "--nonblocking"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    except OSError as error:
        return "", f"py-spy did not start ({error.strerror})"
    try:
        out, err = spying.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # Not subprocess.run: after its timeout it waits for the killed py-spy without a limit, and a py-spy stuck
        # in the kernel on a file server that stopped answering never ends. Given up on, it is reaped by nobody.
        spying.kill()
        try:
            spying.wait(timeout=REAP_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        return "", f"{SLOW} {timeout:.1f} s"
    if spying.returncode == 0 and "Thread " in out:
        return out if out.endswith("\n") else out + "\n", ""
    lines = [line.strip() for line in (err or out).splitlines() if line.strip()]
    return "", lines[0].removeprefix("Error: ") if lines else f"py-spy exited with {spying.returncode}"


def out_of_time(errors: Mapping[int, str]) -> str:
    """The sentence naming the processes not read for want of time, "" without any (pure)."""
    slow = [f"pid {process}: {text}" for process, text in errors.items() if text.startswith((SLOW, SKIPPED))]
    return f"py-spy ran out of time ({'; '.join(slow)}). " if slow else ""


def afterword(pid: int, errors: Mapping[int, str], scope: int | None) -> str:
    """What follows the dumps made when some processes were not read for want of time or leave, "" else (pure)."""
    words = (out_of_time(errors) + others_refused(errors, scope)).strip()
    return f"\n{words}\n" if words else ""


def record(run_dir: Path, attempt: int, rank: int, pid: int, environ: Mapping[str, str], deadline: float) -> None:
    """The command's stacks into the rank's file: each Python process's py-spy dump, by `deadline`, or the
    paragraph saying why none. The file is rewritten as each dump arrives: when the step ends meanwhile (the
    watchdog does, STACKS_WAIT_SECONDS after asking) the dumps made are kept, and the file says whose was cut."""
    head = stacks.header(rank, attempt, pid)
    program = py_spy(environ)
    if program is None:
        stacks.write_stacks(run_dir, attempt, rank, head + why_not(pid, None, {}, ptrace_scope()) + "\n")
        return
    read, errors = "", dict[int, str]()
    for process in descendants(pid, process_parents())[:MOST_PROCESSES]:
        timeout = dump_timeout(deadline, time.monotonic())
        if timeout is None:
            errors[process] = f"{SKIPPED} by the request's {DUMPS_SECONDS:g} s"
            continue
        stacks.write_stacks(run_dir, attempt, rank, head + read + f"(py-spy was reading pid {process} when the "
                            "step ended: its stacks and any after it are missing.)\n")
        text, errors[process] = spy(program, process, timeout)
        read += text
    errors = {process: why for process, why in errors.items() if why}
    scope = ptrace_scope()
    ending = afterword(pid, errors, scope) if read else why_not(pid, program, errors, scope) + "\n"
    stacks.write_stacks(run_dir, attempt, rank, head + read + ending)


def answer_for(pid: int, environ: Mapping[str, str]) -> Callable[[Path, int, int], None]:
    """The supervisor's answer to a request for its command's stacks (stacks.answer_requests' `answer`)."""
    def answer(run_dir: Path, attempt: int, rank: int) -> None:
        asked = stacks.requested_at(run_dir) or time.time()
        time.sleep(OWN_ANSWER_SECONDS)  # a command answering for itself (answer_requests) does within a second
        try:
            if stacks.stacks_file(run_dir, attempt, rank).stat().st_mtime >= asked:
                return
        except OSError:
            pass
        record(run_dir, attempt, rank, pid, environ, time.monotonic() + DUMPS_SECONDS)
    return answer
