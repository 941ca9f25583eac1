"""Mock Slurm: start a step's ranks on this machine with the variables srun would give them.

For machines without Slurm (laptops, CI without root): every rank gets the
step's node list, task counts, rank, local rank, node index, tasks per node and
a job id, so the bootstrap and trainer run unchanged. "Nodes" are loopback
addresses (127.0.0.1, 127.0.0.2, ...) unless named, so each has its own host
name and all of them reach each other. Output is streamed with a rank prefix
(as `srun --label`); when one rank fails, the others are stopped at once
(unless told otherwise, as `srun --kill-on-bad-exit=0`). Like srun, it passes
USR1 and USR2 on to every rank, and stops them all when it is itself stopped
(TERM, Ctrl-C).

GPUs are bound as Slurm binds `--gpus-per-node G`, then split as the bootstrap splits them: the step's "nodes"
take disjoint runs of G of this machine's GPUs (`nvidia-smi -L`, narrowed by the shell's CUDA_VISIBLE_DEVICES),
and each rank gets its own share in CUDA_VISIBLE_DEVICES (chief and ps: none). Without G a task sees no GPU, as
under Slurm without --gpus; asking for more than the machine has is refused before any task starts.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import IO

import hostlist

from hpc_train.bootstrap.devices import NodeGpus, assign_devices, usable_gpus
from hpc_train.bootstrap.layout import compute_layout
from hpc_train.bootstrap.nodelist import expand_nodelist
from hpc_train.bootstrap.nvidia import list_gpus
from hpc_train.bootstrap.placement import Distribution, place_tasks
from hpc_train.bootstrap.portcheck import port_is_free
from hpc_train.bootstrap.roles import Strategy, assign_roles, uses_gpus
from hpc_train.bootstrap.tmpdir import rank_tmpdir, remove
from hpc_train.errors import HpcTrainError
from hpc_train.exitcodes import EXIT_STOPPED

STOP_GRACE_SECONDS = 10.0


@dataclass(frozen=True)
class Step:
    """The step to imitate: its nodes, tasks per node, distribution, job id, and GPUs per node; the strategy and
    ps count say which ranks compute (only those get GPUs, as the bootstrap gives them)."""

    nodes: tuple[str, ...]
    tasks_per_node: int
    distribution: Distribution = Distribution.BLOCK
    job_id: int = 0
    gpus_per_node: int = 0
    strategy: str = "multiworker"
    num_ps: int = 1

    def __post_init__(self) -> None:
        if not self.nodes:
            raise HpcTrainError("--nodes must be 1 or more")
        if self.tasks_per_node < 1:
            raise HpcTrainError(f"--ntasks-per-node {self.tasks_per_node}: must be 1 or more")
        if self.gpus_per_node < 0:
            raise HpcTrainError(f"--gpus-per-node {self.gpus_per_node}: must be 0 or more")

    @classmethod
    def make(cls, nodes: int, tasks_per_node: int, nodelist: str | None = None, distribution: str = "block",
             job_id: int | None = None, gpus_per_node: int = 0, strategy: str = "multiworker",
             num_ps: int = 1) -> "Step":
        if nodes < 1:
            raise HpcTrainError(f"--nodes {nodes}: must be 1 or more")
        names = expand_nodelist("--nodelist", nodelist) if nodelist else tuple(
            f"127.0.0.{index}" for index in range(1, nodes + 1))
        if len(names) != nodes:
            raise HpcTrainError(f"--nodelist {nodelist!r} names {len(names)} nodes but --nodes is {nodes}")
        step = cls(names, tasks_per_node, Distribution(distribution), 0 if job_id is None else job_id,
                   gpus_per_node, strategy, num_ps)
        return step if job_id is not None else step.with_free_ports()

    def with_free_ports(self, attempts: int = 50) -> "Step":
        """This step under a random job id whose derived ports are free here now.

        All of a mock step's "nodes" are this machine, so unlike on a cluster the
        check is exact: two launches at once do not pick the same ports.
        """
        for _ in range(attempts):
            step = replace(self, job_id=random.randrange(900_000, 1_000_000))
            layout = compute_layout(rank_environments(step, {})[0])
            if all(port_is_free(port) for port in layout.ports):
                return step
        raise HpcTrainError("found no job id whose ports are free on this machine; pass --job-id")

    @property
    def num_tasks(self) -> int:
        return len(self.nodes) * self.tasks_per_node


def rank_environments(step: Step, base: Mapping[str, str]) -> list[dict[str, str]]:
    """Every rank's environment: `base` without Slurm variables, plus the step's as srun sets them."""
    clean = {name: value for name, value in base.items() if not name.startswith(("SLURM", "TF_CONFIG"))}
    nodelist = hostlist.collect_hostlist(list(step.nodes))
    if tuple(hostlist.expand_hostlist(nodelist)) != step.nodes:  # keep the given order
        nodelist = ",".join(step.nodes)
    per_node = f"{step.tasks_per_node}(x{len(step.nodes)})"
    shared = {"SLURM_JOB_ID": str(step.job_id), "SLURM_JOBID": str(step.job_id), "SLURM_STEP_ID": "0",
              "SLURM_JOB_NODELIST": nodelist, "SLURM_STEP_NODELIST": nodelist,
              "SLURM_JOB_NUM_NODES": str(len(step.nodes)), "SLURM_STEP_NUM_NODES": str(len(step.nodes)),
              "SLURM_NTASKS": str(step.num_tasks), "SLURM_STEP_NUM_TASKS": str(step.num_tasks),
              "SLURM_TASKS_PER_NODE": per_node, "SLURM_STEP_TASKS_PER_NODE": per_node,
              "SLURM_DISTRIBUTION": step.distribution.value}
    node_of_rank, local_of_rank = place_tasks([step.tasks_per_node] * len(step.nodes), step.distribution)
    return [{**clean, **shared, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(local_of_rank[rank]),
             "SLURM_NODEID": str(node_of_rank[rank]), "SLURMD_NODENAME": step.nodes[node_of_rank[rank]]}
            for rank in range(step.num_tasks)]


@dataclass(frozen=True)
class MachineGpus:
    """The GPUs this machine lets a task use (ids as CUDA_VISIBLE_DEVICES takes them), and how we know."""

    ids: tuple[str, ...]
    source: str


def machine_gpus(env: Mapping[str, str]) -> MachineGpus:
    """This machine's GPUs: `nvidia-smi -L` (none without it), narrowed by `env`'s CUDA_VISIBLE_DEVICES."""
    listing = list_gpus()
    shell = env.get("CUDA_VISIBLE_DEVICES")
    ids = usable_gpus(listing.gpus or (), shell)
    narrowed = f"; CUDA_VISIBLE_DEVICES={shell!r} leaves {len(ids)}" if shell is not None and listing.gpus else ""
    return MachineGpus(ids, listing.source + narrowed)


def gpu_environments(step: Step, machine: MachineGpus) -> tuple[list[dict[str, str]], tuple[str, ...]]:
    """Every rank's GPU variables, and notes for people (pure). Node N of the step gets the machine's GPUs
    N*G .. N*G+G-1 as Slurm's --gpus-per-node G (SLURM_GPUS_ON_NODE, SLURM_JOB_GPUS, SLURM_STEP_GPUS), and each
    rank its share, cut by the bootstrap's own rule (assign_devices), in CUDA_VISIBLE_DEVICES; G = 0 hides every
    GPU, as Slurm does without --gpus. Refused in one line: more GPUs than the machine has."""
    wanted = step.gpus_per_node
    if not machine.ids and wanted == 0:
        return [{} for _ in range(step.num_tasks)], ()  # nothing to hide: the tasks' environment stays as it is
    _check_enough_gpus(step, machine)
    strategy = Strategy.parse(step.strategy)
    roles = assign_roles(step.num_tasks, strategy, step.num_ps).types
    node_of_rank, _ = place_tasks([step.tasks_per_node] * len(step.nodes), step.distribution)
    slots = NodeGpus(tuple(map(str, range(wanted))), wanted, False, True, f"--gpus-per-node {wanted}")
    shares, notes = assign_devices(step.nodes, node_of_rank, [uses_gpus(role, strategy) for role in roles], slots)
    slurm = {"SLURM_GPUS_ON_NODE": str(wanted)} if wanted else {}
    environments = []
    for node, share in zip(node_of_rank, shares):
        node_ids = machine.ids[node * wanted:(node + 1) * wanted]  # the slots of this node's share, as ids
        gres = {name: ",".join(node_ids) for name in ("SLURM_JOB_GPUS", "SLURM_STEP_GPUS")} if wanted else {}
        environments.append({"CUDA_VISIBLE_DEVICES": ",".join(node_ids[int(slot)] for slot in share or ()),
                             **slurm, **gres})
    if wanted == 0:
        notes += (f"no --gpus-per-node: the tasks see none of this machine's {_gpus(len(machine.ids))}, as under "
                  "Slurm without --gpus; --gpus-per-node G gives each node G of them",)
    return environments, notes


def _check_enough_gpus(step: Step, machine: MachineGpus) -> None:
    """One line when the step's nodes ask for more GPUs than this machine has (they share it: disjoint runs)."""
    wanted, nodes, has = step.gpus_per_node, len(step.nodes), len(machine.ids)
    if wanted * nodes <= has:
        return
    fix = ("drop --gpus-per-node" if not has else f"ask for at most {has // nodes}" if has >= nodes
           else f"start at most {has} node{'' if has == 1 else 's'} with --gpus-per-node 1")
    on = "" if nodes == 1 else f" on each of {nodes} nodes"
    raise HpcTrainError(f"--gpus-per-node {wanted}{on}: this machine has {_gpus(has)} ({machine.source}); {fix}")


def _gpus(count: int) -> str:
    return f"{count} GPU{'' if count == 1 else 's'}"


class _Terminated(Exception):
    """The launcher itself was asked to stop (SIGTERM)."""


def launch(step: Step, command: Sequence[str], base: Mapping[str, str] | None = None,
           kill_on_bad_exit: bool = True) -> int:
    """Run `command` as every rank of `step`; return 0, or the first failing rank's exit code."""
    base = os.environ if base is None else base
    gpus, notes = gpu_environments(step, machine_gpus(base))  # (a refusal before any task starts)
    environments = [{**env, **bound} for env, bound in zip(rank_environments(step, base), gpus)]
    for note in notes:
        _note(f"note: {note}")
    processes: list[subprocess.Popen[bytes]] = []
    pumps: list[threading.Thread] = []
    # The handlers first: a warning or a TERM that comes while the ranks start reaches those started (and the
    # launcher), instead of ending the launcher by the signal's default action.
    previous = _forward_signals(processes)
    try:
        _start(command, environments, processes)
        pumps += [_pump(process.stdout, sys.stdout, rank) for rank, process in enumerate(processes)]
        pumps += [_pump(process.stderr, sys.stderr, rank) for rank, process in enumerate(processes)]
        code = _supervise(processes, kill_on_bad_exit)
    except (KeyboardInterrupt, _Terminated) as stop:
        _note(f"{'interrupted' if isinstance(stop, KeyboardInterrupt) else 'terminated'}: stopping every task")
        _stop(processes)  # they checkpoint on SIGTERM, within the grace period
        code = 130 if isinstance(stop, KeyboardInterrupt) else 128 + signal.SIGTERM
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    for pump in pumps:
        pump.join(timeout=5)
    for env in environments:  # as srun's task epilog: each rank's own TMPDIR gone, however it ended
        remove(rank_tmpdir(env))
    return code


def _start(command: Sequence[str], environments: Sequence[Mapping[str, str]],
           processes: list[subprocess.Popen[bytes]]) -> None:
    """Start a process per rank into `processes`; one that cannot start stops those started, in one line."""
    try:
        for env in environments:
            processes.append(subprocess.Popen(list(command), env=dict(env), stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE, start_new_session=True))
    except OSError as error:
        _stop(processes)
        raise HpcTrainError(f"cannot run {command[0]!r}: {error.strerror}; check the command after --") from None


def _forward_signals(processes: list[subprocess.Popen[bytes]]) -> dict[int, object]:
    """Pass USR1/USR2 on to every rank (Slurm's warning before a time limit); TERM stops the launch."""

    def forward(signum: int, frame: object) -> None:
        for process in processes:
            _signal_group(process, signal.Signals(signum))

    def terminate(signum: int, frame: object) -> None:
        raise _Terminated

    handlers = {signal.SIGUSR1: forward, signal.SIGUSR2: forward, signal.SIGTERM: terminate}
    return {signum: signal.signal(signum, handler) for signum, handler in handlers.items()}


def _supervise(processes: list[subprocess.Popen[bytes]], kill_on_bad_exit: bool = True) -> int:
    reported: set[int] = set()
    while True:
        codes = [process.poll() for process in processes]
        failed = [(rank, code) for rank, code in enumerate(codes) if code not in (None, 0)]
        running = sum(code is None for code in codes)
        for rank, code in failed:
            if rank not in reported:
                reported.add(rank)
                then = "stopping" if kill_on_bad_exit else "keeping"
                _note(f"rank {rank} {_describe(code)}; {then} the {running} task(s) still running")
        if failed and (kill_on_bad_exit or running == 0):
            _stop(processes)
            code = failed[0][1]
            return code if code > 0 else 128 - code
        if running == 0:
            return 0
        time.sleep(0.1)


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every rank's process group, then SIGKILL what is left after a grace period."""
    for process in processes:
        _signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for process in processes:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(process, signal.SIGKILL)
            process.wait()


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass


_print_lock = threading.Lock()


def _pump(source: IO[bytes] | None, target: IO[str], rank: int) -> threading.Thread:
    """Copy a rank's output line by line, prefixed by its rank, without mixing lines of different ranks."""

    def copy() -> None:
        if source is None:
            return
        for raw in iter(source.readline, b""):
            with _print_lock:
                target.write(f"{rank}: {raw.decode(errors='replace').rstrip()}\n")
                target.flush()

    thread = threading.Thread(target=copy, daemon=True)
    thread.start()
    return thread


def _describe(code: int) -> str:
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    if code == EXIT_STOPPED:
        return f"stopped after saving a checkpoint (exit code {code})"
    return f"exited with code {code}"


def _note(message: str) -> None:
    with _print_lock:
        print(f"hpc-train launch: {message}", file=sys.stderr, flush=True)
