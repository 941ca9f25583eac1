"""Slurm for tests without a cluster: environments as `srun` gives them to one task, and FakeSlurm, the one fake
of Slurm's commands.

FakeSlurm answers each command from a table (per command line prefix: "scontrol show", "scontrol", "sbatch")
and records every call. The same table serves two ways:

- in-process, as a SlurmClient's transport (`fake.client()`): no subprocess, handlers may be Python functions;
- on PATH (`fake.install(bin_dir)`), for a real shell or a subprocess (`hpc-train ...` as a user runs it): one
  small executable per command, each calling back into the fake's state file to record itself and answer.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from hpc_train.slurm.client import SlurmClient

ROOT = Path(__file__).resolve().parents[1]

# Variables that would leak a real job's identity into a test.
_LEAKY_PREFIXES = ("SLURM", "SLURMD_", "CUDA_VISIBLE_DEVICES", "TF_CONFIG")


def step_env(nodelist: str, tasks_per_node: str, rank: int, *, hosts_by_rank: Sequence[str] | None = None,
             job_id: int | None = 4242, distribution: str | None = None,
             extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The step variables of task `rank`.

    With `hosts_by_rank` (the host of every rank, as the test expects it), the
    task's own SLURM_NODEID, SLURM_LOCALID and SLURMD_NODENAME are filled in too,
    as srun would; they come from the expectation, not from the code under test.
    """
    env = {"SLURM_STEP_NODELIST": nodelist, "SLURM_STEP_TASKS_PER_NODE": tasks_per_node,
           "SLURM_PROCID": str(rank)}
    if job_id is not None:
        env["SLURM_JOB_ID"] = str(job_id)
    if distribution is not None:
        env["SLURM_DISTRIBUTION"] = distribution
    if hosts_by_rank is not None:
        host = hosts_by_rank[rank]
        distinct_hosts = list(dict.fromkeys(hosts_by_rank))
        env["SLURM_STEP_NUM_TASKS"] = str(len(hosts_by_rank))
        env["SLURM_NODEID"] = str(distinct_hosts.index(host))
        env["SLURM_LOCALID"] = str(list(hosts_by_rank[:rank]).count(host))
        env["SLURMD_NODENAME"] = host
    env.update(extra or {})
    return env


def without_slurm(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """A copy of `environ` with every Slurm, CUDA and TF_CONFIG variable removed."""
    return {name: value for name, value in environ.items() if not name.startswith(_LEAKY_PREFIXES)}


@dataclass(frozen=True)
class Reply:
    """One answer of a command: its output and exit code, or `shell`, a bash script run in its place (with the
    command's arguments as "$@", e.g. an srun that runs its step)."""

    stdout: str = ""
    stderr: str = ""
    code: int = 0
    shell: str | None = None


@dataclass(frozen=True)
class Call:
    """One command FakeSlurm answered: its words, its stdin, and for sbatch the script it was given (the file
    named, or stdin)."""

    argv: tuple[str, ...]
    stdin: str | None = None
    script: str | None = None
    cwd: str = ""

    @property
    def command(self) -> str:
        return self.argv[0]

    @property
    def args(self) -> list[str]:
        return list(self.argv[1:])

    @property
    def line(self) -> str:
        return " ".join(self.argv)


# What a table entry may be: stdout, a Reply, a sequence of them (one per call, the last one repeated), or, in
# process only, a function of the call.
Answer = Union[str, Reply, Sequence[Union[str, Reply]], Callable[[Call], Union[str, Reply]]]
NOT_HERE = Reply(stderr="not a command of this fake Slurm", code=127)


class FakeSlurm:
    """Slurm's commands answered from a table, every call recorded (see the module's docstring)."""

    def __init__(self, folder: Path, answers: Mapping[str, Answer] | None = None) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.state = folder / "fake-slurm.json"
        self.functions: dict[str, Callable[[Call], str | Reply]] = {}
        self.state.write_text(json.dumps({"answers": {}, "calls": []}))
        for key, answer in (answers or {}).items():
            self.on(key, answer)

    @classmethod
    def at(cls, folder: Path) -> FakeSlurm:
        """The fake made earlier in `folder` (its table and its calls so far), e.g. by a test's helper."""
        fake = cls.__new__(cls)
        fake.state, fake.functions = folder / "fake-slurm.json", {}
        return fake

    def on(self, key: str, answer: Answer) -> FakeSlurm:
        """Answer command lines starting with `key` ("squeue", "scontrol show") so from now on."""
        with _locked(self.state) as state:
            if callable(answer):
                self.functions[key] = answer
                state["answers"].pop(key, None)
            else:
                replies = [answer] if isinstance(answer, (str, Reply)) else list(answer)
                state["answers"][key] = [asdict(_reply(reply)) for reply in replies]
                self.functions.pop(key, None)
        return self

    def calls(self, command: str | None = None) -> list[Call]:
        """The calls so far, oldest first (of one command if named)."""
        calls = [Call(tuple(call["argv"]), call["stdin"], call["script"], call["cwd"])
                 for call in json.loads(self.state.read_text())["calls"]]
        return [call for call in calls if command is None or call.command == command]

    def lines(self, command: str | None = None) -> list[str]:
        """The calls so far as command lines ("scancel 42")."""
        return [call.line for call in self.calls(command)]

    def scripts(self) -> list[str]:
        """The scripts sbatch was given to submit (by path or on stdin; not --test-only), oldest first."""
        return [call.script for call in self.calls("sbatch") if call.script is not None]

    def commands(self) -> set[str]:
        state = json.loads(self.state.read_text())
        return {key.split()[0] for key in [*state["answers"], *self.functions]}

    # In-process: a SlurmClient's transport.

    def client(self, env: Mapping[str, str] | None = None) -> SlurmClient:
        from hpc_train.slurm.client import SlurmClient

        return SlurmClient(env, self)

    def run(self, argv: Sequence[str], env: Mapping[str, str] | None, timeout: float, stdin: str | None = None,
            cwd: str | os.PathLike[str] | None = None) -> subprocess.CompletedProcess[str]:
        call = _call(argv, stdin, cwd)
        reply = answer(self.state, call, self.functions)
        if reply.shell is None:
            return subprocess.CompletedProcess(list(argv), reply.code, reply.stdout, reply.stderr)
        return subprocess.run(["bash", "-c", reply.shell, *argv], input=stdin, capture_output=True, text=True,
                              env=None if env is None else dict(env), cwd=cwd, timeout=timeout)

    def has(self, command: str, env: Mapping[str, str] | None) -> bool:
        return command in self.commands()

    def start(self, argv: Sequence[str], env: Mapping[str, str] | None,
              piped: bool = False) -> subprocess.Popen[bytes]:
        """The call recorded, and its answer run as a process of its own (a step the caller waits for)."""
        reply = answer(self.state, _call(argv, None, None), self.functions)
        shell = reply.shell if reply.shell is not None else (
            f"printf %s {_quoted(reply.stdout)}; printf %s {_quoted(reply.stderr)} >&2; exit {reply.code}")
        output = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT} if piped else {}
        return subprocess.Popen(["bash", "-c", shell, *argv], env=None if env is None else dict(env), **output)

    # On PATH: executables that call back into the state file.

    def install(self, bin_dir: Path, commands: Sequence[str] = ()) -> dict[str, str]:
        """Put the table's commands (and `commands`) in bin_dir; os.environ with bin_dir first on PATH."""
        if self.functions:
            raise ValueError(f"on PATH the fake answers from its table only, not functions: {sorted(self.functions)}")
        bin_dir.mkdir(parents=True, exist_ok=True)
        for command in sorted(self.commands() | set(commands)):
            executable = bin_dir / command
            executable.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(ROOT)!r})\n"
                                  "from tests.fake_slurm import answer_on_path\n"
                                  f"answer_on_path({str(self.state)!r})\n")
            executable.chmod(0o755)
        return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def _reply(reply: str | Reply) -> Reply:
    return Reply(stdout=reply) if isinstance(reply, str) else reply


def _call(argv: Sequence[str], stdin: str | None, cwd: str | os.PathLike[str] | None) -> Call:
    """The call, with sbatch's script: the first argument that is no option, else stdin."""
    where = Path(cwd or os.getcwd())
    script = None
    if argv[0] == "sbatch" and "--test-only" not in argv:
        named = next((word for word in argv[1:] if not word.startswith("-")), None)
        script = (where / named).read_text() if named and (where / named).is_file() else stdin
    return Call(tuple(argv), stdin, script, str(where))


@contextmanager
def _locked(state_file: Path) -> Iterator[dict]:
    """The fake's state, read and written back under a lock (executables on PATH may run at once)."""
    with open(state_file, "r+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        state = json.load(handle)
        yield state
        handle.seek(0)
        handle.truncate()
        json.dump(state, handle)


def answer(state_file: Path, call: Call, functions: Mapping[str, Callable[[Call], str | Reply]] | None = None) -> Reply:
    """Record the call and answer it from the entry with the longest key its words start with."""
    functions = functions or {}
    with _locked(state_file) as state:
        state["calls"].append(asdict(call))
        keys = [key for key in [*state["answers"], *functions] if list(call.argv[:len(key.split())]) == key.split()]
        if not keys:
            return NOT_HERE
        key = max(keys, key=lambda key: len(key.split()))
        if key in functions:
            return _reply(functions[key](call))
        replies = state["answers"][key]
        reply = Reply(**(replies.pop(0) if len(replies) > 1 else replies[0]))
    return reply


def answer_on_path(state_file: str) -> None:
    """What each installed executable runs: record this call, then answer as the table says."""
    argv = [Path(sys.argv[0]).name, *sys.argv[1:]]
    reads_stdin = argv[0] == "sbatch" and not any(not word.startswith("-") for word in argv[1:])
    stdin = sys.stdin.read() if reads_stdin and not sys.stdin.isatty() else None
    reply = answer(Path(state_file), _call(argv, stdin, None))
    if reply.shell is not None:
        sys.stdout.flush()
        os.execvp("bash", ["bash", "-c", reply.shell, *argv])
    sys.stdout.write(reply.stdout)
    sys.stderr.write(reply.stderr)
    sys.exit(reply.code)



# A step that waits: it notes each USR1/USR2 it gets in $RECORD with its arguments, exits 75 after one (as a
# trainer that saved and stopped), and touches $READY once its traps are set.
WAITING_STEP = ('trap \'echo USR1 "$*" >> "$RECORD"; exit 75\' USR1\n'
                'trap \'echo USR2 "$*" >> "$RECORD"; exit 75\' USR2\n'
                'touch "$READY"\n'
                "for _ in $(seq 600); do sleep 0.1; done\nexit 1\n")


def waiting_srun(bin_dir: Path, record: Path, ready: Path) -> FakeSlurm:
    """An `srun` on PATH in bin_dir whose step waits (WAITING_STEP, noting signals in `record`, touching `ready`)."""
    shell = f"RECORD={_quoted(record)} READY={_quoted(ready)}\n" + WAITING_STEP
    fake = FakeSlurm(bin_dir / ".fake-slurm", {"srun": Reply(shell=shell)})
    fake.install(bin_dir)
    return fake


def _quoted(text: Path | str) -> str:
    import shlex

    return shlex.quote(str(text))
