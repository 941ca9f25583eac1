"""`hpc-train doctor`: a preflight on a new cluster, before anyone waits in a queue for a job that cannot work.

Checks, one line each, with the fix when one fails: Slurm answers (and which
partition), accounting, GPUs per node, and a tiny 2-node step
(hpc_train/doctor/step.py) in which TensorFlow imports with one version on
every node (and what precision `auto` picks there), the ranks reach each other on the ports the bootstrap gives them,
and the data folder is readable there. The run passes only when all do. Warnings (`warn`, the run still passes):
a job's ports take connections from this host, outside the job (no site firewall), and the nodes' locked-memory
and open-files limits are below what multi-node NCCL over InfiniBand needs.
"""

from __future__ import annotations

import json
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hpc_train.bootstrap.keras import keras_problem
from hpc_train.doctor.step import LISTENING, MARK
from hpc_train.errors import HpcTrainError
from hpc_train.slurm.client import SlurmClient, last_words
from hpc_train.login.partitions import Partition, find_partition, read_partitions


# A connection from the login node to a rank's port: refused or accepted at once, or dropped by a firewall.
OUTSIDE_SECONDS = 3.0
# Open files multi-node NCCL is comfortable with (sockets and IB resources per peer and channel).
WANTED_OPEN_FILES = 65536


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str
    fix: str = ""
    # Passed, with a note worth acting on: the run still passes (exit 0).
    warn: bool = False

    def line(self) -> str:
        if self.passed and self.warn:
            return f"warn  {self.name}: {self.detail}{'; fix: ' + self.fix if self.fix else ''}"
        if self.passed:
            return f"ok    {self.name}: {self.detail}"
        return f"FAIL  {self.name}: {self.detail}{'; fix: ' + self.fix if self.fix else ''}"


def slurm_partition(slurm: SlurmClient, wanted: str | None, option: str = "--partition") -> Partition:
    """The partition jobs go to; HpcTrainError (one line) when Slurm does not answer or has no such partition."""
    if not slurm.available("sinfo", "srun"):
        raise HpcTrainError("no Slurm commands here (sinfo, srun not found): run it where you submit jobs, or "
                            "start a local cluster with hpc-train cluster up")
    partitions = read_partitions(slurm)
    chosen = find_partition(partitions, wanted)
    if chosen is None:
        names = ", ".join(p.name for p in partitions) or "none"
        raise HpcTrainError(f"no partition {wanted or '(default)'} here (partitions: {names}); pass {option} NAME")
    return chosen


def accounting(slurm: SlurmClient) -> Check:
    result = slurm.recent_accounting(timeout=20)
    if result.returncode == 0:
        return Check("accounting", True, "sacct answers: status, logs and list read it")
    said = last_words(result)
    # Not a failure of the cluster: hpc-train works without accounting, so this check passes with a note.
    return Check("accounting", True, f"none ({said[:100]}); status, logs and list read scontrol and squeue instead")


def ps_partition(slurm: SlurmClient, wanted: str, gpus_tracked: str | None) -> Check:
    """--ps-partition: where a heterogeneous parameter-server job puts its chief and ps. It must exist (one line,
    exit 2, when not); a partition of GPU nodes is allowed but books GPUs nobody uses (a note). `gpus_tracked`:
    slurm.conf's AccountingStorageTRES, without gres/gpu sacct shows no component's GPUs."""
    chosen = slurm_partition(slurm, wanted, "--ps-partition")
    gpus = max(chosen.node_gpus, default=0)
    note = f"; its nodes have {gpus} GPUs each, which the chief and ps do not use" if gpus else ", no GPUs"
    tracked = "gres/gpu" in (gpus_tracked or "")
    accounted = "" if tracked else " (sacct will not show GPUs per component: AccountingStorageTRES lacks gres/gpu)"
    return Check("ps", True, f"partition {chosen.name}: {chosen.total_nodes} nodes{note}; heterogeneous jobs put the "
                             f"chief and ps there{accounted}")


def data_partition(slurm: SlurmClient, wanted: str) -> Check:
    """--data-partition: the partition a job's tf.data service workers would go to. It must exist (one line, exit 2,
    when not: the partition submit names in its refusal), and have nodes: a job's data service runs there as the
    last component of a heterogeneous job (docs/data_service.md)."""
    chosen = slurm_partition(slurm, wanted, "--data-partition")
    gpus = max(chosen.node_gpus, default=0)
    kind = f"its nodes have {gpus} GPUs each, which data workers do not use" if gpus else "CPU nodes"
    return Check("data", chosen.total_nodes > 0,
                 f"partition {chosen.name}: {chosen.total_nodes} nodes, {kind}; submit --data-workers N "
                 f"--data-partition {chosen.name} runs a job's data service there, a component of its own")


def step_checks(reports: Sequence[dict], nodes: int, local_tensorflow: str | None, data_dir: str | None) -> list[Check]:
    """Judge the test step's reports (pure): TensorFlow, the ports between the ranks, the data folder."""
    if len(reports) < nodes:
        return [Check("step", False, f"{len(reports)} of {nodes} tasks reported", "see the output above")]
    checks = []
    missing = [f"{r['node']}: {r['tensorflow_error']}" for r in reports if "tensorflow_error" in r]
    versions = sorted({r["tensorflow"] for r in reports if "tensorflow" in r})
    if missing:
        checks.append(Check("tensorflow", False, f"does not import on {'; '.join(missing)}",
                            "install it in the environment the job uses (env/setup.sh, env/site.sh modules)"))
    elif len(versions) > 1 or (local_tensorflow and versions != [local_tensorflow]):
        checks.append(Check("tensorflow", False, f"versions differ: nodes {', '.join(versions)}, here "
                            f"{local_tensorflow or 'none'}", "use one environment on every node (a shared venv)"))
    else:
        checks.append(Check("tensorflow", True, f"{versions[0]} on {len(reports)} nodes; {auto_precision(reports)}"))
        checks.append(keras_check(reports))
    unreachable = [r["peers_error"] for r in reports if "peers_error" in r]
    if unreachable:
        checks.append(Check("ports", False, unreachable[0], "let the nodes reach each other on ports 16384-32767 "
                            "(a firewall?), or pass --port-base to the bootstrap"))
    else:
        checks.append(Check("ports", True, f"tasks reached each other at {', '.join(r['address'] for r in reports)}"))
    if data_dir:
        unreadable = [f"{r['node']}: {r['data_error']}" for r in reports if "data_error" in r]
        checks.append(Check("data", not unreadable, "; ".join(unreadable) if unreadable else
                            f"{data_dir} readable on every node", "put the data where the nodes see it (a shared "
                            "file system), e.g. hpc-train data fetch --dest DIR on a login node"))
    return [*checks, outside_check(reports), *limit_checks(reports)]


def keras_check(reports: Sequence[dict]) -> Check:
    """tf-keras of TensorFlow's minor version on every node: what a command's tf.keras is under these strategies."""
    problems = sorted({f"{r['node']}: {problem}" for r in reports
                       if (problem := keras_problem({"tensorflow": r["tensorflow"], "tf-keras": r.get("tf_keras")}))})
    if problems:
        return Check("keras", False, problems[0], "install it in the environment the job uses; without it a "
                     "command's tf.keras is Keras 3, which cannot fit under MultiWorkerMirrored")
    return Check("keras", True, f"tf-keras {reports[0].get('tf_keras')} beside TensorFlow: a command's tf.keras works "
                 "under every strategy")


def auto_precision(reports: Sequence[dict]) -> str:
    """What `precision: auto` trains in, per node, in words: nodes that differ make a job spanning them train in
    the weakest of their choices (training/precision.common)."""
    nodes: dict[tuple[str, str], list[str]] = {}
    for report in reports:
        chosen = report.get("precision") or {"policy": "unknown", "why": "the node did not say"}
        nodes.setdefault((chosen["policy"], chosen["why"]), []).append(str(report.get("node", "?")))
    said = "; ".join(f"{policy} on {', '.join(names)} ({why.removeprefix('auto: ')})"
                     for (policy, why), names in nodes.items())
    differ = " (the nodes differ: a job across them trains in the weakest)" if len(nodes) > 1 else ""
    return f"precision auto: {said}{differ}"


def run_step(slurm: SlurmClient, partition: Partition, nodes: int, data_dir: str | None,
             wait_seconds: int, contained: Callable[[list[str]], list[str]] | None = None) -> tuple[list[dict], str]:
    """The test step: one rank per node; their reports (each with `outside`: what this host's try at its port
    found), and srun's last words if it failed. Read as it comes: a rank says where it listens, and waits.
    `contained`: the ranks' command in a container (doctor/container.py)."""
    command = [sys.executable, "-m", "hpc_train.doctor.step", *(("--data-dir", data_dir) if data_dir else ())]
    arguments = [f"--nodes={nodes}", "--ntasks-per-node=1", f"--partition={partition.name}",
                 f"--immediate={wait_seconds}", "--time=5", "--job-name=hpc-train-doctor", "--kill-on-bad-exit=1",
                 *(contained(command) if contained else command)]
    process = slurm.stream_step(arguments)
    timer = threading.Timer(wait_seconds + 300, process.kill)  # a step that never ends is a failed run
    timer.start()
    reports, outside, said = [], {}, []
    for raw in process.stdout or ():
        line = raw.decode(errors="replace").rstrip("\n")
        if line.startswith(LISTENING):
            outside[line[len(LISTENING):]] = try_from_here(line[len(LISTENING):])
        elif line.startswith(MARK):
            reports.append(json.loads(line[len(MARK):]))
        elif line.strip():
            said.append(line.strip())
    returncode = process.wait()
    timer.cancel()
    for report in reports:
        if report.get("address") in outside:
            report["outside"] = outside[report["address"]]
    if returncode == -signal.SIGKILL:
        return reports, f"the step did not end within {wait_seconds + 300} s"
    if returncode == 0:
        return reports, ""
    # The node's word that a container runtime is not there says most; a warning (a rank's check-in without a
    # job secret) says nothing of why the step failed; else srun's (or a rank's) last line.
    missing = [line for line in said if "execve()" in line]
    telling = missing or [line for line in said if "warning:" not in line][-1:] or said[-1:]
    return reports, telling[0] if telling else f"exit code {returncode}"


def try_from_here(address: str, timeout: float = OUTSIDE_SECONDS) -> str:
    """What a connection from this host (outside the job) to a rank's listening port finds: accepted, refused
    (a firewall's reject), or no answer (dropped)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return "accepted"
    except ConnectionRefusedError:
        return "refused"
    except OSError:
        return "no answer"


def outside_check(reports: Sequence[dict]) -> Check:
    """Whether a job's ports on the nodes take connections from this host, outside the job (pure): a warning when
    they do, since anyone who reaches them can run TensorFlow graphs there as the job's user."""
    tried = sorted((report["address"], report["outside"]) for report in reports if "outside" in report)
    if not tried:
        return Check("outside", True, "not tried (no rank listened on its port)", warn=True)
    open_ = [address for address, found in tried if found == "accepted"]
    if open_:
        return Check("outside", True, f"the job's ports take connections from this host, outside the job "
                     f"({', '.join(open_)}): anyone on the network can run TensorFlow graphs there as the job's "
                     "user", "install the site firewall as Slurm's Prolog and Epilog (docs/site-firewall.md)",
                     warn=True)
    return Check("outside", True, f"the job's ports are closed to this host, outside the job "
                 f"({', '.join(f'{address}: {found}' for address, found in tried)})")


def limit_checks(reports: Sequence[dict]) -> list[Check]:
    """The nodes' locked-memory and open-files limits against what multi-node NCCL over InfiniBand needs (pure):
    memory it registers with the card is locked (unlimited wanted), and it opens many descriptors."""
    def shown(value: int) -> str:
        return "unlimited" if value < 0 else f"{value // 1024} KiB" if value >= 1024 else str(value)

    memlock = [(r["node"], r["memlock"]) for r in reports if "memlock" in r]
    nofile = [(r["node"], r["nofile"]) for r in reports if "nofile" in r]
    if not memlock or not nofile:
        return []  # a step of an older hpc-train on the nodes: nothing said
    low_lock = [f"{node}: {shown(value)}" for node, value in memlock if value >= 0]
    low_files = [f"{node}: {value}" for node, value in nofile if 0 <= value < WANTED_OPEN_FILES]
    least = min((value for _, value in nofile if value >= 0), default=None)
    return [Check("memlock", True, "; ".join(low_lock) + ": multi-node NCCL over InfiniBand wants unlimited locked "
                  "memory" if low_lock else "unlimited on every node: enough for NCCL over InfiniBand",
                  "set memlock unlimited for jobs: LimitMEMLOCK=infinity in slurmd's systemd unit and "
                  "'* - memlock unlimited' in /etc/security/limits.conf (Slurm passes the submitting shell's "
                  "limits on: PropagateResourceLimits)", warn=bool(low_lock)),
            Check("nofile", True, "; ".join(low_files) + f" open files: multi-node NCCL wants {WANTED_OPEN_FILES} "
                  "or more" if low_files else f"{'unlimited' if least is None else f'{least} or more'} open files "
                  "on every node", f"raise it: LimitNOFILE={WANTED_OPEN_FILES} in slurmd's systemd unit and "
                  f"'* - nofile {WANTED_OPEN_FILES}' in /etc/security/limits.conf", warn=bool(low_files))]
